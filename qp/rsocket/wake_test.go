package rsocket

import (
	"context"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// A Read parked for its data is woken by the completion channel alone:
// the pass that finds the data kicks no one, so no Wake is left behind to
// end the next Read's wait at once (each parked Read used to leave one,
// an extra wait per message). In rxevm's VM (rxe0 on 10.99.0.1, rxe1 on 10.99.0.2);
// skipped elsewhere.
func TestVMParkedReadLeavesNoWake(t *testing.T) {
	if _, err := os.Stat("/dev/infiniband/rdma_cm"); err != nil {
		t.Skip("needs RDMA CM (rxevm's VM)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := Listen(ctx, "10.99.0.1:7749", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
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
	}()
	c, err := Dial(ctx, "10.99.0.1:7749", Options{Source: netip.MustParseAddr("10.99.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
