package streamtest

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/integration/rxetest"
	"github.com/pureverbs/pureverbs/qp/rsocket"
)

// endpoints makes a veth pair with rxe on both ends and returns a
// listener on A's address and a dialer from B's, both with o.
func endpoints(t *testing.T, o rsocket.Options) (*rsocket.Listener, func(ctx context.Context) (*rsocket.Conn, error)) {
	t.Helper()
	p := rxetest.Veth(t)
	a, _ := netip.AddrFromSlice(p.A.Addr.IP.To4())
	b, _ := netip.AddrFromSlice(p.B.Addr.IP.To4())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rsocket.Listen(ctx, netip.AddrPortFrom(a, 0).String(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	addr := l.Addr().String()
	return l, func(ctx context.Context) (*rsocket.Conn, error) {
		o.Source = b
		return rsocket.Dial(ctx, addr, o)
	}
}

// connect dials l and accepts the connection.
func connect(l *rsocket.Listener, dial func(context.Context) (*rsocket.Conn, error)) (client, server net.Conn, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		c   *rsocket.Conn
		err error
	}
	accepted := make(chan result, 1)
	go func() {
		c, err := l.AcceptConn(ctx)
		accepted <- result{c, err}
	}()
	cc, err := dial(ctx)
	r := <-accepted
	if err != nil || r.err != nil {
		if cc != nil {
			cc.Close()
		}
		if r.c != nil {
			r.c.Close()
		}
		if err == nil {
			err = r.err
		}
		return nil, nil, err
	}
	return cc, r.c, nil
}
