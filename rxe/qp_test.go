package rxe

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

func TestQPFromRings(t *testing.T) {
	db := &countingDoorbell{}
	q, err := newQPFromRings(mustRing(t, 256, 7), mustRing(t, 128, 7), uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 2, MaxRecvSGE: 9, MaxInlineData: 16}, db)
	if err != nil {
		t.Fatal(err)
	}
	want := uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 7, MaxSendSGE: 2, MaxRecvSGE: 5, MaxInlineData: 16}
	if got := q.Limits(); got != want {
		t.Fatalf("Limits() = %+v, want %+v", got, want)
	}
	if q.Verbs() != nil {
		t.Fatal("a simulated QP has a kernel QP")
	}
	if err := q.PostSend([]SendWR{{Opcode: OpSend}, {Opcode: OpSend}}); err != nil || db.n.Load() != 1 {
		t.Fatalf("PostSend: %v, %d doorbells", err, db.n.Load())
	}
	if err := q.PostRecv([]RecvWR{{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.PostSend([]SendWR{{Opcode: OpSend}}); !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("PostSend after Close: %v", err)
	}
	if err := q.PostRecv([]RecvWR{{}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("PostRecv after Close: %v", err)
	}

	noRQ, err := newQPFromRings(mustRing(t, 256, 3), nil, uverbs.QPCap{}, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := noRQ.PostRecv([]RecvWR{{}}); !errors.Is(err, ErrSRQAttached) || errors.Is(err, ErrNotSupported) {
		t.Fatalf("PostRecv without a receive ring: %v", err)
	}
	if _, err := newQPFromRings(mustRing(t, 256, 3), nil, uverbs.QPCap{}, nil); err == nil {
		t.Fatal("a QP without a doorbell")
	}
}

func TestCQFromRingClose(t *testing.T) {
	r := mustRing(t, 64, 3)
	c, err := newCQFromRing(r)
	if err != nil {
		t.Fatal(err)
	}
	encodeWC(r.Slot(0), &WC{WRID: 9})
	r.SetProducer(1)
	wc := make([]WC, 2)
	if n, err := c.Poll(wc); n != 1 || err != nil || wc[0].WRID != 9 {
		t.Fatalf("Poll: %d %v %+v", n, err, wc[0])
	}
	for range 2 {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Poll(wc); !errors.Is(err, ErrClosed) {
		t.Fatalf("Poll after Close: %v", err)
	}
}

// A QP whose receive ring maps and whose send ring does not must leave
// nothing mapped (the VM test covers the same with the kernel QP).
func TestMapQPUnwinds(t *testing.T) {
	fd := memfdQueue(t, 8192, 6, 7)
	before := memfdMappings(t)
	resp := createQPResp{
		rqMI: mmInfo{offset: 0, size: 384 + 8*64},
		sqMI: mmInfo{offset: 4096, size: 4096}, // a zero header: not a ring
	}
	_, err := mapQP(fdMmap(fd), nil, &resp, true)
	if !errors.Is(err, ErrBadRing) || !strings.Contains(err.Error(), "send queue") {
		t.Fatalf("err = %v, want a bad send ring", err)
	}
	if got := memfdMappings(t); got != before {
		t.Fatalf("%d memfd mappings after the failure, want %d", got, before)
	}
}

func memfdMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:rxe-ring")
}
