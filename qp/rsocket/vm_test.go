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
