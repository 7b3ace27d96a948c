package rsocket

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/pureverbs/pureverbs/qp/rdmacm"
)

// acceptTimeout bounds one connection's handshake inside Accept.
const acceptTimeout = 30 * time.Second

// Listener accepts rsocket connections. It implements net.Listener.
type Listener struct {
	l      *rdmacm.Listener
	o      Options
	s      sizes
	addr   *net.TCPAddr
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	err    error
}

// Listen listens for rsocket connections on address ("ip:port"; an empty
// host listens on every RDMA device, port 0 picks one). o applies to the
// connections accepted.
func Listen(ctx context.Context, address string, o Options) (*Listener, error) {
	s, err := o.sizes()
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "rsocket", Addr: addrOf(address), Err: err}
	}
	l, err := rdmacm.Listen(ctx, address, rdmacm.Options{Backlog: o.Backlog})
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "rsocket", Addr: addrOf(address), Err: err}
	}
	lctx, cancel := context.WithCancel(context.Background())
	return &Listener{l: l, o: o, s: s, addr: net.TCPAddrFromAddrPort(l.Addr()), ctx: lctx, cancel: cancel}, nil
}

// Accept waits for the next connection and returns it (a *Conn).
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptConn(context.Background())
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptConn waits for the next connection, or until ctx is done or the
// Listener is closed (net.ErrClosed). A request that is not rsocket's, or
// whose handshake fails, is rejected and the wait goes on.
func (l *Listener) AcceptConn(ctx context.Context) (*Conn, error) {
	ctx, stop := mergeCancel(ctx, l.ctx)
	defer stop()
	for {
		req, err := l.l.Request(ctx)
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, rdmacm.ErrClosed) {
				err = net.ErrClosed
			}
			return nil, &net.OpError{Op: "accept", Net: "rsocket", Addr: l.addr, Err: err}
		}
		if c, err := l.accept(ctx, req); err == nil {
			return c, nil
		}
		if l.ctx.Err() != nil {
			return nil, &net.OpError{Op: "accept", Net: "rsocket", Addr: l.addr, Err: net.ErrClosed}
		}
		if err := ctx.Err(); err != nil {
			return nil, &net.OpError{Op: "accept", Net: "rsocket", Addr: l.addr, Err: err}
		}
	}
}

// accept answers one request: rsocket's rs_accept.
func (l *Listener) accept(ctx context.Context, req *rdmacm.Request) (*Conn, error) {
	if _, err := parseConnData(req.PrivateData()); err != nil {
		req.Reject(nil)
		return nil, err
	}
	r, err := newRes(req.Context(), l.s)
	if err != nil {
		req.Reject(nil)
		return nil, err
	}
	c := newConn(r)
	var pd [connDataLen]byte
	c.connData().marshal(pd[:])
	actx, cancel := context.WithTimeout(ctx, acceptTimeout)
	defer cancel()
	rc, err := req.AcceptQP(actx, r.q, rdmacm.Options{PrivateData: pd[:], Setup: c.setup})
	if err != nil {
		r.release()
		return nil, err
	}
	if err := c.start(rc, l.o); err != nil {
		return nil, err
	}
	return c, nil
}

// Close stops listening; a blocked Accept returns net.ErrClosed.
// Connections accepted are not affected.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.cancel()
		l.err = l.l.Close()
	})
	return l.err
}

// Addr is the address listened on, a *net.TCPAddr.
func (l *Listener) Addr() net.Addr { return l.addr }

// mergeCancel returns a context done when either a or b is.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}
