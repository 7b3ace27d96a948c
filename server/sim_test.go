package server

import (
	"sync/atomic"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/rxe/rxesim"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// simQueue is a connection on rxesim: the server's CQ and QP, an eventfd
// standing in for the completion channel, and the sender's QP.
type simQueue struct {
	dev     *rxesim.Device
	cq      *rxesim.CQ
	qp      *rxesim.QP
	evfd    int
	armed   atomic.Bool
	arms    atomic.Int64
	drained atomic.Int64
}

// Poll implements queue.
func (s *simQueue) Poll(wc []cq.WC) (int, error) { return simPoll(s.cq, wc) }

// simPoll polls the simulated CQ into package cq's completions, as cq.CQ
// does over a real ring.
func simPoll(c *rxesim.CQ, wc []cq.WC) (int, error) {
	return c.User.PollFunc(len(wc), func(i int, w *rxe.WC) {
		wc[i] = cq.WC{WRID: w.WRID, Status: cq.Status(w.Status), Opcode: cq.Opcode(w.Opcode), ByteLen: w.ByteLen,
			Imm: w.Imm, QPNum: w.QPNum, SrcQP: w.SrcQP, Flags: cq.WCFlags(w.Flags)}
	})
}

// PostRecv implements queue; the simulated kernel then retries the sends
// that found no receive, as an RNR retry would.
func (s *simQueue) PostRecv(wrs []qp.RecvWR) error {
	if err := s.qp.User.PostRecvFunc(len(wrs), func(i int, w *rxe.RecvWR) { *w = rxe.RecvWR(wrs[i]) }); err != nil {
		return err
	}
	s.dev.Process()
	return nil
}

// Arm implements queue.
func (s *simQueue) Arm() error { s.armed.Store(true); s.arms.Add(1); return nil }

// EventFD implements queue.
func (s *simQueue) EventFD() int { return s.evfd }

// DrainEvents implements queue.
func (s *simQueue) DrainEvents() error {
	var b [8]byte
	if _, err := unix.Read(s.evfd, b[:]); err == nil {
		s.drained.Add(1)
	}
	return nil
}

// notify raises the completion event if the CQ is armed, as the kernel
// does after producing a completion.
func (s *simQueue) notify() {
	if s.armed.Swap(false) {
		one := [8]byte{1}
		unix.Write(s.evfd, one[:])
	}
}

// srcSlots is how many messages the sender's buffer holds side by side: a
// send that waits for a receive reads its bytes only when it runs.
const srcSlots = 520

// simRig is a server-side pool and loop over rxesim, with a sender QP
// connected to the loop's QP and a registered source buffer.
type simRig struct {
	t       testing.TB
	q       *simQueue
	p       *pool
	c       *counters
	l       *loop
	cfg     Config
	frames  chan Frame
	stop    atomic.Bool
	drain   atomic.Bool
	unmaps  atomic.Int32
	sender  *rxesim.QP
	sendCQ  *rxesim.CQ
	src     []byte
	srcAddr uint64
	srcKey  uint32
	sendWR  [1]qp.SendWR
	sendSGE [1]uverbs.SGE
	wc      [16]cq.WC
}

func newSimRig(t testing.TB, depth, size int, handler func(Frame)) *simRig {
	t.Helper()
	r := &simRig{t: t, cfg: Config{Device: "sim", Depth: depth, MaxPayload: size, MinRNRTimer: 12, Handler: handler}}
	var err error
	if r.cfg, err = r.cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	dev := rxesim.New()
	srvCQ, err := dev.NewCQ(depth)
	if err != nil {
		t.Fatal(err)
	}
	if r.sendCQ, err = dev.NewCQ(1024); err != nil {
		t.Fatal(err)
	}
	srvQP, err := dev.NewQP(srvCQ, srvCQ, rxesim.QPSpec{Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(depth), MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if r.sender, err = dev.NewQP(r.sendCQ, r.sendCQ, rxesim.QPSpec{Cap: uverbs.QPCap{MaxSendWR: 512, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	rxesim.Connect(srvQP, r.sender)
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(evfd) })
	r.q = &simQueue{dev: dev, cq: srvCQ, qp: srvQP, evfd: evfd}
	slab := make([]byte, depth*size)
	base, key := dev.Register(slab)
	r.src = make([]byte, srcSlots*size)
	r.srcAddr, r.srcKey = dev.Register(r.src)
	if r.p, err = newPool(slab, base, key, size, depth, evfd, func() error { r.unmaps.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.p.close() })
	r.c = &counters{}
	r.c.postedLow.Store(int64(depth))
	if handler == nil {
		r.frames = make(chan Frame, depth)
	}
	r.l = newLoop(r.p, r.q, r.c, &r.cfg, r.frames, &r.stop, &r.drain)
	if err := r.l.postIdle(); err != nil {
		t.Fatal(err)
	}
	r.sendSGE[0] = uverbs.SGE{Addr: r.srcAddr, LKey: r.srcKey}
	r.sendWR[0] = qp.SendWR{Opcode: qp.SendWithImm, SGEs: r.sendSGE[:]}
	return r
}

// send posts one message of n bytes from src[off:] with op and imm, then
// raises the event if the server armed its CQ. It returns false when the
// sender's queue is full.
func (r *simRig) send(op qp.SendOpcode, off, n int, imm uint32) bool {
	r.sendSGE[0].Addr = r.srcAddr + uint64(off)
	r.sendSGE[0].Length = uint32(n)
	r.sendWR[0].Opcode = op
	r.sendWR[0].Imm = imm
	r.sendWR[0].SGEs = r.sendSGE[:]
	if n == 0 {
		r.sendWR[0].SGEs = nil
	}
	w := &r.sendWR[0]
	err := r.sender.User.PostSend([]rxe.SendWR{{ID: w.ID, Opcode: rxe.Opcode(w.Opcode), Flags: rxe.SendFlags(w.Flags), Imm: w.Imm, SGEs: w.SGEs}})
	r.q.notify()
	if err != nil {
		return false
	}
	r.reapSends()
	return true
}

// reapSends polls the sender's completions (unsignalled sends leave none
// unless they failed) and fails the test on an error.
func (r *simRig) reapSends() {
	n, err := simPoll(r.sendCQ, r.wc[:])
	if err != nil {
		r.t.Fatal(err)
	}
	for _, wc := range r.wc[:n] {
		if wc.Status != cq.Success {
			r.t.Errorf("sender completion %v", wc.Status)
		}
	}
}

// checkInvariant fails unless posted + held == depth and the slot states
// agree with both counts.
func (r *simRig) checkInvariant() {
	r.t.Helper()
	posted, held := r.p.postedHeld()
	if posted+held != r.p.depth {
		r.t.Fatalf("posted %d + held %d != depth %d", posted, held, r.p.depth)
	}
	n := 0
	for i := range r.p.slots {
		if r.p.slots[i].state() == slotPosted {
			n++
		}
	}
	if n != posted {
		r.t.Fatalf("%d slots in state posted, counter says %d", n, posted)
	}
}
