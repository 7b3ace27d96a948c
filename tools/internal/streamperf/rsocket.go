package streamperf

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
)

// RSocket is the Network of rsockets (qp/rsocket), with the C tools'
// options: send and receive rings of twice -B or 512 KiB (rsocket doubles
// SO_SNDBUF and SO_RCVBUF, as Linux does), the connection's inline size,
// -k's keepalive, and non-blocking calls (-T n) that poll rather than park.
type RSocket struct {
	// Log receives the keepalive lines rstream prints for -k.
	Log io.Writer
	// IOMapSize is how many mappings the peer may make into each
	// connection (riostream's RDMA_IOMAPSIZE, 1; rstream's 0).
	IOMapSize int
}

// options are the rsocket options of o for a connection whose inline size
// is inline (-1: rsocket's default).
func (n RSocket) options(o *Options, inline int) rsocket.Options {
	buf := o.Buffer
	if buf == 0 {
		buf = DefaultBuffer
	}
	// One connection, whose calls wait on their own threads, as the C
	// tools' do.
	ro := rsocket.Options{SendBuffer: 2 * buf, RecvBuffer: 2 * buf, IOMapSize: n.IOMapSize,
		Keepalive: time.Duration(o.Keepalive) * time.Second, ThreadWait: true}
	if o.DontWait && !o.Async {
		// The C tools spin on EAGAIN: a call of theirs never sleeps. A
		// call here ends at its deadline, SpinTick ahead; polling until
		// then, rather than parking, spends the CPU the C tools spend
		// and waits as they do.
		ro.PollTime = SpinTick
	}
	switch {
	case inline == 0:
		ro.Inline = -1 // none: the bandwidth connection and -i 0
	case inline > 0:
		ro.Inline = inline
	}
	return ro
}

// Listen listens on -b (every RDMA device when empty) at -p. The
// connections it accepts have the options of the first connection of the
// plan: rsocket takes them from the listener, and this one's cannot be
// changed between accepts as the C server's are (inline only, which
// changes nothing on the wire).
func (n RSocket) Listen(ctx context.Context, o *Options) (net.Listener, error) {
	host, err := o.lookup(ctx, o.Bind)
	if err != nil {
		return nil, err
	}
	port, err := net.LookupPort("tcp", o.Port)
	if err != nil {
		return nil, err
	}
	l, err := rsocket.Listen(ctx, net.JoinHostPort(host, strconv.Itoa(port)), n.options(o, o.Plan()[0].Inline))
	if err != nil {
		return nil, err
	}
	return rsocketListener{l, n, o}, nil
}

// Dial connects to -s at -p, from -b when given.
func (n RSocket) Dial(ctx context.Context, o *Options, inline int) (net.Conn, error) {
	host, err := o.lookup(ctx, o.Server)
	if err != nil {
		return nil, err
	}
	port, err := net.LookupPort("tcp", o.Port)
	if err != nil {
		return nil, err
	}
	ro := n.options(o, inline)
	if o.Bind != "" {
		src, err := o.lookup(ctx, o.Bind)
		if err != nil {
			return nil, err
		}
		if ro.Source, err = netip.ParseAddr(src); err != nil {
			return nil, err
		}
	}
	printKeepalive(n.Log, o)
	return rsocket.Dial(ctx, net.JoinHostPort(host, strconv.Itoa(port)), ro)
}

type rsocketListener struct {
	*rsocket.Listener
	n RSocket
	o *Options
}

// Accept prints the keepalive lines where the C server does: for the
// listening socket before the accept and for the new one after.
func (l rsocketListener) Accept() (net.Conn, error) {
	printKeepalive(l.n.Log, l.o)
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	printKeepalive(l.n.Log, l.o)
	return c, nil
}

// printKeepalive prints what rstream's set_keepalive reads back after
// enabling -k.
func printKeepalive(w io.Writer, o *Options) {
	if o.Keepalive != 0 && w != nil {
		fmt.Fprintf(w, "Keepalive: ON\n  time: %d\n", o.Keepalive)
	}
}
