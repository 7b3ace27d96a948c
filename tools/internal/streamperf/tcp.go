package streamperf

import (
	"context"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// TCP is the Network of -T s: kernel TCP sockets with the C tools'
// socket options (SO_SNDBUF and SO_RCVBUF of -B or 512 KiB before connect
// or listen, TCP_NODELAY, and -k's keepalive), for comparison runs over
// the same link.
type TCP struct {
	// Log receives the keepalive lines rstream prints for -k.
	Log io.Writer
}

// Listen listens on -b (every address when empty) at -p.
func (n TCP) Listen(ctx context.Context, o *Options) (net.Listener, error) {
	host, err := o.lookup(ctx, o.Bind)
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: n.control(o), KeepAlive: -1}
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, o.Port))
	if err != nil {
		return nil, err
	}
	return tcpListener{ln.(*net.TCPListener), n, o}, nil
}

// Dial connects to -s at -p, from -b when given.
func (n TCP) Dial(ctx context.Context, o *Options, _ int) (net.Conn, error) {
	host, err := o.lookup(ctx, o.Server)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Control: n.control(o), KeepAlive: -1}
	if o.Bind != "" {
		src, err := o.lookup(ctx, o.Bind)
		if err != nil {
			return nil, err
		}
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, o.Port))
	if err != nil {
		return nil, err
	}
	if err := n.keepalive(c.(*net.TCPConn), o); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// control sets the buffer sizes on the socket before it connects or
// listens, so that they shape TCP's window as the C tools' do.
func (n TCP) control(o *Options) func(network, address string, rc syscall.RawConn) error {
	size := o.Buffer
	if size == 0 {
		size = DefaultBuffer
	}
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, size); serr != nil {
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, size)
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// keepalive applies -k to c and prints what rstream prints after setting
// it.
func (n TCP) keepalive(c *net.TCPConn, o *Options) error {
	if o.Keepalive == 0 {
		return nil
	}
	err := c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Duration(o.Keepalive) * time.Second})
	if err != nil {
		return err
	}
	printKeepalive(n.Log, o)
	return nil
}

type tcpListener struct {
	*net.TCPListener
	n TCP
	o *Options
}

// Accept gives the accepted connection the C server's options (its
// set_options on the new socket).
func (l tcpListener) Accept() (net.Conn, error) {
	printKeepalive(l.n.Log, l.o) // rstream sets it on the listening socket too
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	if err := l.n.keepalive(c, l.o); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// lookup resolves host the way the C tools' getaddrinfo call does (first
// address; numeric only under -f ip), returning it as a literal; "" stays
// "" (the wildcard or no binding).
func (o *Options) lookup(ctx context.Context, host string) (string, error) {
	if host == "" {
		return "", nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.String(), nil
	}
	if o.NumericHost {
		return "", &net.DNSError{Err: "Name or service not known", Name: host, IsNotFound: true}
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", err
	}
	return addrs[0].Unmap().String(), nil
}
