//go:build linux

package netpoll_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/pureverbs/pureverbs/netpoll"
)

// printer prints each datagram and stops the loop.
type printer struct{ stop context.CancelFunc }

func (p printer) OnData(id netpoll.ConnID, b []byte, from netip.AddrPort) {
	fmt.Printf("source %v: %s\n", id, b)
	p.stop()
}

func (p printer) OnClosed(id netpoll.ConnID, reason netpoll.CloseReason, err error) {
	fmt.Printf("source %v: %v\n", id, reason)
}

func Example() {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	ctx, stop := context.WithCancel(context.Background())
	d, err := netpoll.New(netpoll.Config{Backend: netpoll.EpollSpin}, printer{stop})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	if _, err := d.AddConn(conn); err != nil {
		fmt.Println(err)
		return
	}

	client, err := net.DialUDP("udp4", nil, conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	client.Write([]byte("hello"))

	// Run spins on a locked OS thread until the handler cancels ctx.
	if err := d.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// source 0.1: hello
	// source 0.1: removed
}
