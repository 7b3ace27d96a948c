package example

import (
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/integration/rxetest"
)

// TestRCMessageOverVeth connects two RC QPs, one on each end of a veth pair
// with rxe on both, and sends a message from A to B.
func TestRCMessageOverVeth(t *testing.T) {
	exchange(t, rxetest.Veth(t)) // skips (naming what is missing) on a machine without rdma_rxe or root
}

// TestRCMessageLoopback does the same with both QPs on one rxe device.
func TestRCMessageLoopback(t *testing.T) {
	exchange(t, rxetest.Loopback(t))
}

func exchange(t *testing.T, p *rxetest.Pair) {
	t.Helper()
	a, err := openEnd(p.A)
	t.Cleanup(a.close)
	if err != nil {
		t.Fatalf("open %s: %v", p.A.RDMA, err)
	}
	b, err := openEnd(p.B)
	t.Cleanup(b.close)
	if err != nil {
		t.Fatalf("open %s: %v", p.B.RDMA, err)
	}
	if err := a.connect(b); err != nil {
		t.Fatalf("connect %s: %v", p.A.RDMA, err)
	}
	if err := b.connect(a); err != nil {
		t.Fatalf("connect %s: %v", p.B.RDMA, err)
	}

	if err := b.postRecv(1); err != nil {
		t.Fatal(err)
	}
	msg := "hello from " + p.A.RDMA + " to " + p.B.RDMA
	copy(a.buf.Bytes(), msg)
	if err := a.send(2, len(msg)); err != nil {
		t.Fatal(err)
	}
	if id, _, err := a.wait(10 * time.Second); err != nil || id != 2 {
		t.Fatalf("send completion: id %d, %v", id, err)
	}
	id, n, err := b.wait(10 * time.Second)
	if err != nil || id != 1 {
		t.Fatalf("receive completion: id %d, %v", id, err)
	}
	if got := string(b.buf.Bytes()[:n]); got != msg {
		t.Fatalf("received %q, want %q", got, msg)
	}
	t.Logf("%s -> %s: %q", p.A.Addr.IP, p.B.Addr.IP, msg)
}
