//go:build linux

package vethns

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
)

func linkNames(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A pair carries UDP between its namespaces, never shows up in the host's
// namespace, and Close leaves nothing behind.
func TestPair(t *testing.T) {
	if err := Check(); err != nil {
		t.Skip(err)
	}
	hostLinks, fds := linkNames(t), openFDs(t)
	p, err := New(Config{Queues: 2, GRO: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := linkNames(t); !slices.Equal(got, hostLinks) {
		t.Errorf("host links changed: %v, were %v", got, hostLinks)
	}
	for _, n := range []*NS{p.A, p.B} {
		if on, err := n.GRO(); err != nil || !on {
			t.Errorf("%s: GRO %v, %v", n.Link, on, err)
		}
	}
	var srv *net.UDPConn
	if err := p.B.Do(func() (err error) {
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.B.Addr, 4000)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var cli *net.UDPConn
	if err := p.A.Do(func() (err error) {
		cli, err = net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cli.Write([]byte("across"))
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	n, from, err := srv.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "across" || from.Addr() != p.A.Addr {
		t.Fatalf("got %q from %v, %v", buf[:n], from, err)
	}
	// The server's address does not exist in the host namespace.
	if c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.B.Addr, 4000))); err == nil {
		c.Close()
		t.Errorf("%v is bindable in the host namespace", p.B.Addr)
	}
	srv.Close()
	cli.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := openFDs(t); got != fds {
		t.Errorf("%d descriptors open after Close, %d before", got, fds)
	}
	if err := p.A.Do(func() error { return nil }); err == nil {
		t.Errorf("Do on a closed namespace succeeded")
	}
}

// ethtool's ifreq: 16-byte name then the union, 40 bytes on 64-bit
// (struct ifreq in <linux/if.h>); ethtool_value is two u32.
func TestIfreqLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("layout pinned for 64-bit; elsewhere the struct is only larger than ifreq, which is harmless")
	}
	var ifr ifreqData
	if s := unsafe.Sizeof(ifr); s != 40 {
		t.Errorf("ifreq is %d bytes, want 40", s)
	}
	if o := unsafe.Offsetof(ifr.Data); o != 16 {
		t.Errorf("ifr_data at %d, want 16", o)
	}
	if s := unsafe.Sizeof(ethtoolCmd{}); s != 8 {
		t.Errorf("ethtool_value is %d bytes, want 8", s)
	}
}
