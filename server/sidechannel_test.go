package server

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSideChannelEvictsSilent: with every exchange slot held by a client
// that has not sent its whole record, a new client takes the slot of the
// oldest one (that client is closed, the others keep theirs) instead of
// being refused: a sender reconnecting among silent strangers is not
// locked out until their exchanges time out.
func TestSideChannelEvictsSilent(t *testing.T) {
	s := &Server{done: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- s.Serve(ctx, ln, ServeOptions{MaxExchanges: 2, Timeout: 10 * time.Second})
	}()
	defer func() {
		cancel()
		if err := <-served; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v", err)
		}
	}()
	dial := func(half bool) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if half {
			c.Write([]byte("0000:000123:0000")) // 16 of 52 bytes
		}
		time.Sleep(100 * time.Millisecond) // accepted, and older than the next
		return c
	}
	open := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, os.ErrDeadlineExceeded)
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	}
	c1, c2 := dial(false), dial(true)
	c3 := dial(false)
	if !closed(c1) || !open(c2) || !open(c3) {
		t.Fatalf("with 2 slots held by a silent and a half-record client, a third took no slot: oldest closed %v, others open %v %v (refused %d)",
			closed(c1), open(c2), open(c3), s.c.refused.Load())
	}
	c4 := dial(true)
	if !closed(c2) || !open(c3) || !open(c4) {
		t.Fatalf("the fourth client did not take the oldest silent one's slot")
	}
	if r, e := s.c.refused.Load(), s.c.evicted.Load(); r != 0 || e != 2 {
		t.Fatalf("refused %d evicted %d; want 0 and 2", r, e)
	}
}
