package main

import (
	"context"
	"errors"
	"net"
	"slices"

	"github.com/pureverbs/pureverbs/qp/rsocket"
	"github.com/pureverbs/pureverbs/tools/internal/streamperf"
	"github.com/pureverbs/pureverbs/uverbs"
)

// iomapNetwork hands out rsocket connections as iomappers.
type iomapNetwork struct{ streamperf.Network }

// Listen listens as the wrapped Network does; what it accepts is wrapped.
func (n iomapNetwork) Listen(ctx context.Context, o *streamperf.Options) (net.Listener, error) {
	l, err := n.Network.Listen(ctx, o)
	if err != nil {
		return nil, err
	}
	return iomapListener{l}, nil
}

// Dial connects as the wrapped Network does and wraps the connection.
func (n iomapNetwork) Dial(ctx context.Context, o *streamperf.Options, inline int) (net.Conn, error) {
	c, err := n.Network.Dial(ctx, o, inline)
	if err != nil {
		return nil, err
	}
	return wrapIOMap(c), nil
}

type iomapListener struct{ net.Listener }

// Accept wraps the connection accepted.
func (l iomapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrapIOMap(c), nil
}

// wrapIOMap gives an rsocket connection riostream's iomap calls; others
// pass unchanged (and are refused at riomap).
func wrapIOMap(c net.Conn) net.Conn {
	if rc, ok := c.(*rsocket.Conn); ok {
		return &iomapConn{Conn: rc}
	}
	return c
}

// iomapConn is an rsocket connection with the buffers it mapped and has
// not unmapped yet.
type iomapConn struct {
	*rsocket.Conn
	bufs []*uverbs.Buffer
}

// IOMap maps a new off-heap buffer of size bytes at offset 0.
func (c *iomapConn) IOMap(size int) (window, error) {
	b, err := uverbs.NewBuffer(size, uverbs.BufferOptions{})
	if err != nil {
		return nil, err
	}
	if _, err := c.Conn.IOMap(b, 0); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	c.bufs = append(c.bufs, b)
	return bufferWindow{c, b}, nil
}

// unmap is riounmap, then the buffer's release.
func (c *iomapConn) unmap(b *uverbs.Buffer) error {
	i := slices.Index(c.bufs, b)
	if i < 0 {
		return nil // the connection closed first
	}
	c.bufs = slices.Delete(c.bufs, i, i+1)
	return errors.Join(c.Conn.IOUnmap(b), b.Close())
}

// Close closes the connection, then releases the buffers still mapped.
func (c *iomapConn) Close() error {
	err := c.Conn.Close()
	for _, b := range c.bufs {
		err = errors.Join(err, b.Close())
	}
	c.bufs = nil
	return err
}

// bufferWindow is a mapped uverbs.Buffer; its last byte is read with an
// atomic load.
type bufferWindow struct {
	c *iomapConn
	b *uverbs.Buffer
}

func (w bufferWindow) Bytes() []byte  { return w.b.Bytes() }
func (w bufferWindow) LastByte() byte { return w.b.LoadByte(w.b.Len() - 1) }

// Close unmaps the window (riounmap), as the C tool does after each test,
// so that the next test's mapping takes the peer's table entry again.
func (w bufferWindow) Close() error { return w.c.unmap(w.b) }
