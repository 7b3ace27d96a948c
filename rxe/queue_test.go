package rxe

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/pureverbs/pureverbs/rxe/internal/ring"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// countingDoorbell counts doorbells, as the kernel would see POST_SEND
// commands.
type countingDoorbell struct {
	n   atomic.Int64
	err error
}

func (d *countingDoorbell) PostSendDoorbell() error { d.n.Add(1); return d.err }

// testQueues makes a QP's queues over heap rings: 256-byte send slots (3 SGEs
// or 48 inline bytes of room), 128-byte receive slots (5 SGEs of room).
func testQueues(t testing.TB, sendWR, recvWR int, lim uverbs.QPCap) (*sendQueue, *recvQueue, *countingDoorbell) {
	t.Helper()
	db := &countingDoorbell{}
	sq, rq, err := newQueues(mustRing(t, 256, sendWR), mustRing(t, 128, recvWR), lim, db)
	if err != nil {
		t.Fatal(err)
	}
	return sq, rq, db
}

var testLimits = uverbs.QPCap{MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 32}

func TestNewQueuesClipsLimitsToSlots(t *testing.T) {
	sq, rq, _ := testQueues(t, 3, 3, uverbs.QPCap{MaxSendSGE: 100, MaxRecvSGE: 100, MaxInlineData: 1000})
	if sq.maxSGE != 3 || sq.maxInline != 48 || rq.maxSGE != 5 {
		t.Fatalf("limits send SGE %d inline %d recv SGE %d, want 3 48 5", sq.maxSGE, sq.maxInline, rq.maxSGE)
	}
	if _, _, err := newQueues(mustRing(t, 128, 3), nil, testLimits, &countingDoorbell{}); !errors.Is(err, ErrBadRing) {
		t.Fatalf("128-byte send slots: err = %v", err)
	}
	if _, _, err := newQueues(mustRing(t, 256, 3), mustRing(t, 32, 3), testLimits, &countingDoorbell{}); !errors.Is(err, ErrBadRing) {
		t.Fatalf("32-byte receive slots: err = %v", err)
	}
}

func TestPostSendOneDoorbellPerCall(t *testing.T) {
	sq, _, db := testQueues(t, 15, 3, testLimits)
	wrs := make([]SendWR, 10)
	for i := range wrs {
		wrs[i] = SendWR{ID: uint64(i), Opcode: OpSend, SGEs: []SGE{{Addr: uint64(i), Length: 1, LKey: 1}}}
	}
	if err := sq.post(wrs); err != nil {
		t.Fatal(err)
	}
	if got := db.n.Load(); got != 1 {
		t.Fatalf("%d doorbells for one PostSend of 10 WRs, want 1", got)
	}
	if err := sq.post(wrs[:1]); err != nil {
		t.Fatal(err)
	}
	if got := db.n.Load(); got != 2 {
		t.Fatalf("%d doorbells after two calls, want 2", got)
	}
	if err := sq.post(nil); err != nil || db.n.Load() != 2 {
		t.Fatalf("empty post: err %v, doorbells %d", err, db.n.Load())
	}
	r := sq.ring
	if r.Len() != 11 {
		t.Fatalf("ring holds %d WQEs, want 11", r.Len())
	}
	for i := uint32(0); i < 11; i++ {
		d, err := decodeSendWQE(r.Slot(i))
		if err != nil {
			t.Fatal(err)
		}
		if d.SSN != i || d.WR.ID != uint64(i%10) {
			t.Fatalf("slot %d: ssn %d id %d", i, d.SSN, d.WR.ID)
		}
	}
}

func TestPostWithinGrantedDepth(t *testing.T) {
	// 8-slot rings (7 usable) of which the kernel granted 5.
	sq, rq, _ := testQueues(t, 7, 7, uverbs.QPCap{MaxSendWR: 5, MaxRecvWR: 5, MaxSendSGE: 1, MaxRecvSGE: 1})
	sends := make([]SendWR, 6)
	recvs := make([]RecvWR, 6)
	for i := range sends {
		sends[i] = SendWR{ID: uint64(i), Opcode: OpSend}
	}
	if err := sq.post(sends); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("6 sends at depth 5: %v", err)
	}
	if err := rq.post(recvs); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("6 receives at depth 5: %v", err)
	}
	if err := sq.post(sends[:5]); err != nil {
		t.Fatal(err)
	}
	if err := rq.post(recvs[:5]); err != nil {
		t.Fatal(err)
	}
	if err := sq.post(sends[:1]); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a sixth send: %v", err)
	}
	sq.ring.SetConsumer(2) // the kernel retires two
	if err := sq.post(sends[:3]); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("3 sends with 2 retired: %v", err)
	}
	if err := sq.post(sends[:2]); err != nil {
		t.Fatal(err)
	}
	if sq.ring.Len() != 5 {
		t.Fatalf("%d outstanding, want 5", sq.ring.Len())
	}
	// Larger grants than the ring holds are clipped to the ring.
	sq2, _, _ := testQueues(t, 3, 3, uverbs.QPCap{MaxSendWR: 100})
	if sq2.maxWR != 3 {
		t.Fatalf("depth %d, want the ring's 3", sq2.maxWR)
	}
}

// A failed doorbell comes after the WQE is published: the error says the
// request is queued (ErrDoorbell) and carries the doorbell's errno, and the
// WQE is in the ring, so a caller that retried would post it twice.
func TestPostSendDoorbellError(t *testing.T) {
	sq, _, db := testQueues(t, 3, 3, testLimits)
	db.err = unix.EINVAL
	err := sq.post([]SendWR{{ID: 7, Opcode: OpSend}})
	if !errors.Is(err, ErrDoorbell) || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("err = %v, want ErrDoorbell wrapping the doorbell's EINVAL", err)
	}
	var de *DoorbellError
	if !errors.As(err, &de) || de.Err != unix.EINVAL {
		t.Fatalf("err = %#v, want a *DoorbellError holding EINVAL", err)
	}
	if n := sq.ring.Len(); n != 1 {
		t.Fatalf("ring holds %d WQEs after the failed doorbell, want the 1 queued", n)
	}
	if err := sq.post([]SendWR{{Opcode: 99}}); errors.Is(err, ErrDoorbell) {
		t.Fatalf("an invalid request reported %v: nothing was queued", err)
	}
}

// destroyWatchDoorbell fails the test's check if a doorbell rings while, or
// after, the kernel QP is being destroyed.
type destroyWatchDoorbell struct {
	destroying atomic.Bool
	late       atomic.Int64
	rung       atomic.Int64
}

func (d *destroyWatchDoorbell) PostSendDoorbell() error {
	if d.destroying.Load() {
		d.late.Add(1)
	}
	d.rung.Add(1)
	return nil
}

// PostSend racing Close (run under -race): every post either rings its
// doorbell before the destroy begins or fails with ErrClosed; none rings on a
// destroyed QP, and a failed destroy leaves the queue usable.
func TestPostSendRacesClose(t *testing.T) {
	for round := 0; round < 50; round++ {
		db := &destroyWatchDoorbell{}
		sq, _, err := newQueues(mustRing(t, 256, 63), nil, testLimits, db)
		if err != nil {
			t.Fatal(err)
		}
		if err := sq.detach(func() error { return unix.EBUSY }); !errors.Is(err, unix.EBUSY) {
			t.Fatalf("failed destroy: %v", err)
		}
		ring := sq.ring
		start := make(chan struct{})
		done := make(chan error, 4)
		for g := 0; g < 4; g++ {
			go func() {
				<-start
				for {
					err := sq.post([]SendWR{{Opcode: OpSend}})
					switch {
					case errors.Is(err, ErrClosed):
						done <- nil
						return
					case errors.Is(err, ErrQueueFull):
						ring.SetConsumer(ring.Producer()) // play the kernel
					case err != nil:
						done <- err
						return
					}
				}
			}()
		}
		close(start)
		runtime.Gosched()
		if err := sq.detach(func() error { db.destroying.Store(true); return nil }); err != nil {
			t.Fatal(err)
		}
		for g := 0; g < 4; g++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if n := db.late.Load(); n != 0 {
			t.Fatalf("round %d: %d doorbells rang on a destroyed QP", round, n)
		}
	}
}

func TestPostSendErrors(t *testing.T) {
	sge := SGE{Addr: 1, Length: 1, LKey: 1}
	for _, c := range []struct {
		name  string
		wr    SendWR
		want  error
		errno unix.Errno
	}{
		{"too many SGEs", SendWR{Opcode: OpSend, SGEs: []SGE{sge, sge, sge}}, ErrTooManySGEs, unix.EINVAL},
		{"inline too long", SendWR{Opcode: OpSend, Flags: Inline, Inline: make([]byte, 33)}, ErrInlineTooLong, unix.EINVAL},
		{"inline with SGEs", SendWR{Opcode: OpSend, Flags: Inline, SGEs: []SGE{sge}}, ErrInvalidWR, unix.EINVAL},
		{"inline read", SendWR{Opcode: OpRDMARead, Flags: Inline}, ErrInvalidWR, unix.EINVAL},
		{"unknown opcode", SendWR{Opcode: 10}, ErrInvalidWR, unix.EINVAL}, // IB_UVERBS_WR_TSO: not on rxe
		{"unknown flag", SendWR{Opcode: OpSend, Flags: 1 << 4}, ErrInvalidWR, unix.EINVAL},
		{"over 2 GiB", SendWR{Opcode: OpSend, SGEs: []SGE{{Length: 1 << 31}, {Length: 1}}}, ErrInvalidWR, unix.EINVAL},
	} {
		sq, _, db := testQueues(t, 7, 3, testLimits)
		good := SendWR{ID: 1, Opcode: OpSend, SGEs: []SGE{sge}}
		err := sq.post([]SendWR{good, good, c.wr, good})
		if !errors.Is(err, c.want) || !errors.Is(err, c.errno) {
			t.Errorf("%s: err = %v, want %v (%v)", c.name, err, c.want, c.errno)
		}
		// All or nothing: the valid requests before the bad one are not
		// published, no doorbell rang, and the SSN did not move.
		if sq.ring.Producer() != 0 || sq.prod != 0 || sq.ssn != 0 || db.n.Load() != 0 {
			t.Errorf("%s: producer %d ssn %d doorbells %d after a failed post", c.name, sq.ring.Producer(), sq.ssn, db.n.Load())
		}
		if err := sq.post([]SendWR{good}); err != nil {
			t.Fatalf("%s: post after failure: %v", c.name, err)
		}
		if d, _ := decodeSendWQE(sq.ring.Slot(0)); d.SSN != 0 || d.WR.ID != 1 {
			t.Errorf("%s: WQE after failure: %+v", c.name, d)
		}
	}
}

func TestPostSendInlineAtLimit(t *testing.T) {
	sq, _, _ := testQueues(t, 3, 3, testLimits)
	if err := sq.post([]SendWR{{Opcode: OpSend, Flags: Inline, Inline: make([]byte, 32)}}); err != nil {
		t.Fatal(err)
	}
}

func TestPostSendQueueFull(t *testing.T) {
	sq, _, db := testQueues(t, 7, 3, testLimits) // 8 slots: 7 WQEs
	wrs := make([]SendWR, 8)
	for i := range wrs {
		wrs[i] = SendWR{ID: uint64(i), Opcode: OpSend}
	}
	if err := sq.post(wrs); !errors.Is(err, ErrQueueFull) || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("8 WRs into 7 free slots: err = %v", err)
	}
	if sq.ring.Producer() != 0 || db.n.Load() != 0 {
		t.Fatal("a failed post published WQEs")
	}
	if err := sq.post(wrs[:7]); err != nil {
		t.Fatal(err)
	}
	if !sq.ring.Full() {
		t.Fatal("ring not full after 7 WQEs")
	}
	if err := sq.post(wrs[:1]); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("post to a full ring: err = %v", err)
	}
	// The kernel consumes three: three more fit, a fourth does not.
	sq.ring.SetConsumer(3)
	if err := sq.post(wrs[:4]); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("4 WRs into 3 free slots: err = %v", err)
	}
	if err := sq.post(wrs[:3]); err != nil {
		t.Fatal(err)
	}
	if sq.ring.Producer() != 2 || !sq.ring.Full() {
		t.Fatalf("after wrap: producer %d full %v", sq.ring.Producer(), sq.ring.Full())
	}
}

func TestPostRecvErrorsAndFull(t *testing.T) {
	_, rq, _ := testQueues(t, 3, 3, testLimits) // 4 slots: 3 WQEs
	sge := SGE{Addr: 1, Length: 8, LKey: 1}
	if err := rq.post([]RecvWR{{ID: 1, SGEs: []SGE{sge}}, {ID: 2, SGEs: []SGE{sge, sge, sge}}}); !errors.Is(err, ErrTooManySGEs) {
		t.Fatalf("err = %v, want ErrTooManySGEs", err)
	}
	if rq.ring.Producer() != 0 {
		t.Fatal("a failed post published receives")
	}
	wrs := []RecvWR{{ID: 1, SGEs: []SGE{sge}}, {ID: 2, SGEs: []SGE{sge, sge}}, {ID: 3}}
	if err := rq.post(wrs); err != nil {
		t.Fatal(err)
	}
	if err := rq.post(wrs[:1]); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err = %v, want ErrQueueFull", err)
	}
	for i := uint32(0); i < 3; i++ {
		d, err := decodeRecvWQE(rq.ring.Slot(i))
		if err != nil {
			t.Fatal(err)
		}
		if d.WR.ID != wrs[i].ID || len(d.WR.SGEs) != len(wrs[i].SGEs) || d.Length != uint32(8*len(wrs[i].SGEs)) {
			t.Fatalf("slot %d: %+v", i, d)
		}
	}
}

func TestPostAfterClose(t *testing.T) {
	sq, rq, _ := testQueues(t, 3, 3, testLimits)
	sq.ring, rq.ring = nil, nil
	if err := sq.post([]SendWR{{Opcode: OpSend}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("send: err = %v", err)
	}
	if err := rq.post([]RecvWR{{}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("recv: err = %v", err)
	}
}

// kernelRequester plays rdma_rxe's requester and completer over a send ring:
// it consumes every published WQE and completes it into cq. It stops after
// total WQEs.
func kernelRequester(sq, cq *ring.Ring, total int, errc chan<- error) {
	var cons, prod uint32
	for done := 0; done < total; {
		p := sq.Producer()
		if p == cons || cq.Room(prod, cq.Consumer()) == 0 {
			runtime.Gosched()
			continue
		}
		d, err := decodeSendWQE(sq.Slot(cons))
		if err != nil {
			errc <- err
			return
		}
		if d.SSN != uint32(done) || d.WR.ID != uint64(done) || d.Length != d.Resid {
			errc <- errors.New("requester read a wrong WQE")
			return
		}
		encodeWC(cq.Slot(prod), &WC{WRID: d.WR.ID, Opcode: WCSend, ByteLen: d.Length})
		prod = cq.Next(prod)
		cq.SetProducer(prod)
		cons = sq.Next(cons)
		sq.SetConsumer(cons)
		done++
	}
	errc <- nil
}

// TestPostSendAgainstSimulatedKernel streams 20 000 sends in batches through
// an 8-slot send ring to a goroutine playing the kernel, polling their
// completions: every WQE is seen once, in order, across thousands of wraps.
func TestPostSendAgainstSimulatedKernel(t *testing.T) {
	const total = 20000
	sq, _, db := testQueues(t, 7, 3, testLimits)
	cqr := mustRing(t, 64, 31)
	cq, err := newCQRing(cqr)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go kernelRequester(sq.ring, cqr, total, errc)
	buf := make([]byte, 64)
	wrs := make([]SendWR, 5)
	wc := make([]WC, 8)
	posted, completed, full := 0, 0, 0
	for completed < total {
		n := min(len(wrs), total-posted)
		for i := range wrs[:n] {
			wrs[i] = SendWR{ID: uint64(posted + i), Opcode: OpSend, Flags: Inline, Inline: buf[:(posted+i)%33]}
		}
		switch err := sq.post(wrs[:n]); {
		case errors.Is(err, ErrQueueFull):
			full++
		case err != nil:
			t.Fatal(err)
		default:
			posted += n
		}
		got, err := cq.poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:got] {
			if w.WRID != uint64(completed) || w.ByteLen != uint32(completed%33) {
				t.Fatalf("completion %d: %+v", completed, w)
			}
			completed++
		}
		if got == 0 {
			runtime.Gosched()
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d doorbells for %d sends; the ring was full %d times", db.n.Load(), total, full)
}

func TestPostZeroAllocs(t *testing.T) {
	sq, rq, _ := testQueues(t, 63, 63, uverbs.QPCap{MaxSendSGE: 3, MaxRecvSGE: 2, MaxInlineData: 48})
	cqr := mustRing(t, 64, 63)
	cq, err := newCQRing(cqr)
	if err != nil {
		t.Fatal(err)
	}
	sges := []SGE{{Addr: 1, Length: 100, LKey: 1}, {Addr: 2, Length: 200, LKey: 1}}
	inline := make([]byte, 48)
	sends := []SendWR{
		{ID: 1, Opcode: OpSend, Flags: Signaled, SGEs: sges},
		{ID: 2, Opcode: OpSendWithImm, Imm: 5, Flags: Inline, Inline: inline},
		{ID: 3, Opcode: OpRDMAWrite, SGEs: sges[:1], RemoteAddr: 9, RKey: 9},
	}
	recvs := []RecvWR{{ID: 1, SGEs: sges}, {ID: 2, SGEs: sges[:1]}}
	wc := make([]WC, 4)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := sq.post(sends); err != nil {
			t.Fatal(err)
		}
		if err := rq.post(recvs); err != nil {
			t.Fatal(err)
		}
		// The kernel's part: consume, complete.
		sq.ring.SetConsumer(sq.prod)
		rq.ring.SetConsumer(rq.prod)
		p := cqr.Producer()
		encodeWC(cqr.Slot(p), &WC{WRID: 1})
		cqr.SetProducer(cqr.Next(p))
		if n, err := cq.poll(wc); n != 1 || err != nil {
			t.Fatalf("poll: %d, %v", n, err)
		}
		// Error paths allocate nothing either.
		if err := sq.post([]SendWR{{Opcode: 99}}); err == nil {
			t.Fatal("bad opcode posted")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per post+poll, want 0", allocs)
	}
}

// BenchmarkRingPostSend is the provider's share of a send: validate, encode
// one WQE into the slot, publish; the doorbell is a counter and the
// "kernel" consumes by moving the consumer index.
func BenchmarkRingPostSend(b *testing.B) {
	sq, _, _ := testQueues(b, 63, 3, testLimits)
	wrs := []SendWR{{ID: 1, Opcode: OpSend, Flags: Signaled, SGEs: []SGE{{Addr: 1, Length: 64, LKey: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := sq.post(wrs); err != nil {
			b.Fatal(err)
		}
		sq.ring.SetConsumer(sq.prod)
	}
}

// BenchmarkRingPostRecv is a receive post: encode, publish.
func BenchmarkRingPostRecv(b *testing.B) {
	_, rq, _ := testQueues(b, 3, 63, testLimits)
	wrs := []RecvWR{{ID: 1, SGEs: []SGE{{Addr: 1, Length: 64, LKey: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := rq.post(wrs); err != nil {
			b.Fatal(err)
		}
		rq.ring.SetConsumer(rq.prod)
	}
}

// BenchmarkRingPoll is one completion produced by the "kernel" and polled.
func BenchmarkRingPoll(b *testing.B) {
	r := mustRing(b, 64, 63)
	c, err := newCQRing(r)
	if err != nil {
		b.Fatal(err)
	}
	wc := make([]WC, 4)
	var prod uint32
	b.ReportAllocs()
	for b.Loop() {
		encodeWC(r.Slot(prod), &WC{WRID: 1, ByteLen: 64})
		prod = r.Next(prod)
		r.SetProducer(prod)
		if n, _ := c.poll(wc); n != 1 {
			b.Fatal("nothing polled")
		}
	}
}
