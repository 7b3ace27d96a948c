package rsocket

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// These tests look at a connection's internals, so they live in the
// package; they need rxevm's VM (rxe0 on 10.99.0.1, rxe1 on 10.99.0.2),
// where make itest-example runs them, and skip elsewhere.
func needVM(t *testing.T) {
	if _, err := os.Stat("/dev/infiniband/rdma_cm"); err != nil {
		t.Skip("needs RDMA CM (rxevm's VM)")
	}
}

// vmConn listens on 10.99.0.1:port, serves the one connection it accepts
// with serve, and returns a connection to it from 10.99.0.2 dialled with
// o; the test's end closes all three.
func vmConn(ctx context.Context, t *testing.T, port int, o Options, serve func(net.Conn)) *Conn {
	t.Helper()
	addr := netip.AddrPortFrom(netip.MustParseAddr("10.99.0.1"), uint16(port)).String()
	l, err := Listen(ctx, addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	o.Source = netip.MustParseAddr("10.99.0.2")
	c, err := Dial(ctx, addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A Read parked for its data is woken by the completion channel alone:
// the pass that finds the data kicks no one, so no Wake is left behind to
// end the next Read's wait at once (each parked Read used to leave one,
// an extra wait per message). The client polls not at all, so that every
// Read parks.
func TestVMParkedReadLeavesNoWake(t *testing.T) {
	needVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := vmConn(ctx, t, 7749, Options{PollTime: -1}, func(c net.Conn) {
		b := make([]byte, 64)
		for {
			if _, err := io.ReadFull(c, b); err != nil {
				return
			}
			time.Sleep(time.Millisecond) // the client parks meanwhile
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	})
	b := make([]byte, 64)
	for i := range 20 {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		// A deadline already past looks once: a Wake left behind is
		// ErrWoken.
		if err := c.r.rw.Wait(ctx, time.Unix(1, 0), c.r.ch.FD()); err == fdwait.ErrWoken {
			t.Fatalf("round %d: the Read left a wake behind", i)
		}
	}
}

// A Read polling for its data (here for up to a minute) still ends at its
// deadline, set before or during the poll, and at Close: well before the
// minute is out.
func TestVMPollEnds(t *testing.T) {
	needVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := vmConn(ctx, t, 7750, Options{PollTime: time.Minute}, func(c net.Conn) {
		io.Copy(io.Discard, c) // sends nothing
	})
	start := time.Now()
	defer func() {
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("took %v: a Read polled on", d)
		}
	}()
	b := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(b); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with a deadline: %v", err)
	}
	c.mu.Lock()
	armed := c.armed
	c.mu.Unlock()
	if armed {
		t.Error("a Read that polled up to its deadline armed the CQ for a wait that could not be")
	}
	c.SetReadDeadline(time.Time{})
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(b)
		read <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.SetReadDeadline(time.Now())
	if err := <-read; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read given a deadline while it polls: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	go func() {
		_, err := c.Read(b)
		read <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	if err := <-read; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read closed while it polls: %v", err)
	}
}

// A peer's shutdown that comes while CloseWrite waits for a control slot
// does not stand in for this side's own: CloseWrite still sends it, and
// the peer reads io.EOF. (Taking the peer's message for the answer to one
// never sent left the peer's Read waiting for good.) The test takes the
// client's free slots away while its CloseWrite waits, and gives them back
// once the server's shutdown has come.
func TestVMCloseWriteWaitingForSlot(t *testing.T) {
	needVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shut := make(chan struct{})
	served := make(chan error, 1)
	c := vmConn(ctx, t, 7751, Options{}, func(s net.Conn) {
		<-shut
		if err := s.(*Conn).CloseWrite(); err != nil {
			served <- err
			return
		}
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := s.Read(make([]byte, 1))
		served <- err
	})
	until := func(what string, cond func() bool) {
		t.Helper()
		for !func() bool { c.mu.Lock(); defer c.mu.Unlock(); return cond() }() {
			if ctx.Err() != nil {
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			}
			time.Sleep(time.Millisecond)
		}
	}
	until("the set-up's control messages", c.allSendsDone)
	c.mu.Lock()
	freeMax := c.ctrlMax
	c.ctrlMax = c.ctrlSeq
	c.mu.Unlock()
	closed := make(chan error, 1)
	go func() { closed <- c.CloseWrite() }()
	until("CloseWrite to wait", func() bool { return c.ctrlParked })
	close(shut)
	until("the server's shutdown", func() bool { return c.state&stReadable == 0 || !c.ctrlParked })
	c.mu.Lock()
	c.ctrlMax = freeMax
	c.mu.Unlock()
	c.r.ww.Wake()
	if err := <-closed; err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	if err := <-served; err != io.EOF {
		t.Fatalf("the server's Read after both shutdowns: %v, want io.EOF", err)
	}
}
