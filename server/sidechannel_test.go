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

// TestSideChannelShutdownAfterCrossedExchanges: two exchanges complete
// close together and their last steps cross: B replaced A as the running
// sender, but A's bookkeeping runs after B's (A's connection already
// closed by the replacement). Serve's shutdown must still close B's
// connection, ending B's WatchPeer watch; with the running connection
// remembered as A's, the watch went on and shutdown (Serve's return on
// ctx cancel) waited for ever.
func TestSideChannelShutdownAfterCrossedExchanges(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (server, client net.Conn) {
		t.Helper()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return server, client
	}
	a, _ := pair()
	b, bPeer := pair()
	ssA, ssB := &session{}, &session{}
	s := &Server{done: make(chan struct{}), sess: ssB} // B replaced A
	a.Close()                                          // by the replacement
	sc := &sideChannel{s: s, opts: ServeOptions{WatchPeer: true, Logf: t.Logf}, conns: map[net.Conn]*exchanging{a: {}, b: {}}}
	sc.wg.Add(2)
	go func() { defer sc.wg.Done(); sc.connected(b, ssB) }()
	for { // B's bookkeeping first: B watches its connection
		sc.mu.Lock()
		live := sc.live
		sc.mu.Unlock()
		if live == b {
			break
		}
		time.Sleep(time.Millisecond)
	}
	aDone := make(chan struct{})
	go func() { defer sc.wg.Done(); defer close(aDone); sc.connected(a, ssA) }()
	<-aDone
	shut := make(chan struct{})
	go func() { sc.shutdown(); close(shut) }()
	select {
	case <-shut:
	case <-time.After(5 * time.Second):
		b.Close() // let the test end
		t.Fatal("shutdown did not close the running sender's connection: its watch still runs after 5 s")
	}
	bPeer.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := bPeer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the running sender's connection after shutdown: %v, want it closed", err)
	}
}
