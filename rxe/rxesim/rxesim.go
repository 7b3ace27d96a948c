// Package rxesim plays the kernel's side of rdma_rxe in ordinary memory, so
// that the rings, encodings and queue logic above it can be tested and
// benchmarked on a host without RDMA.
//
// A [Device] registers memory (handing out keys the way memory regions
// would), creates completion queues and RC queue pairs whose rings are
// ordinary Go memory, and executes posted sends between connected queue
// pairs: SEND and SEND_WITH_IMM consume a receive of the peer and copy the
// payload, RDMA WRITE(_WITH_IMM) and RDMA READ copy between registered
// buffers, and completions are produced into the CQ rings with the statuses
// the kernel uses (LOC_PROT_ERR for a bad key, LOC_LEN_ERR for a receive too
// small, WR_FLUSH_ERR for work flushed by the error state).
//
// Like 6.1's rxe, which runs the requester in the context of the doorbell
// write, a doorbell executes the send queue synchronously; [Device.Process]
// runs all queue pairs again (a send that found no receive waits, as an
// RNR-NAKed one would). Nothing on these paths allocates.
package rxesim

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/rxe/internal/ring"
	"github.com/pureverbs/pureverbs/rxe/internal/sim"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Device is a simulated rxe device. Its methods may be called from several
// goroutines.
type Device struct {
	mu      sync.Mutex
	mrs     map[uint32][]byte // key → registered memory
	qps     []*QP
	nextKey uint32
	nextQPN uint32
}

// New returns an empty simulated device.
func New() *Device {
	return &Device{mrs: make(map[uint32][]byte), nextKey: 0x100, nextQPN: 17}
}

// Register makes buf addressable by the returned key, as both lkey and
// rkey, at the virtual address of its first byte (as an MR without
// IBV_ACCESS_ZERO_BASED). buf must not be empty.
func (d *Device) Register(buf []byte) (addr uint64, key uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key = d.nextKey
	d.nextKey++
	d.mrs[key] = buf
	return Addr(buf), key
}

// Deregister forgets key; later requests naming it fail with a protection
// error.
func (d *Device) Deregister(key uint32) {
	d.mu.Lock()
	delete(d.mrs, key)
	d.mu.Unlock()
}

// Addr is the virtual address of buf's first byte, as an SGE carries it.
func Addr(buf []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))) }

// CQ is the kernel side of a simulated completion queue.
type CQ struct {
	dev  *Device
	ring *ring.Ring
	prod uint32
	// User is the user side to poll.
	User *rxe.CQ
}

// NewCQ creates a CQ holding at least cqe completions, in slots as large as
// 6.1's rxe makes them (struct rxe_cqe rounded up to 64 bytes).
func (d *Device) NewCQ(cqe int) (*CQ, error) {
	r, err := ring.Alloc(64, cqe)
	if err != nil {
		return nil, err
	}
	u, err := sim.NewCQ(r)
	if err != nil {
		return nil, err
	}
	return &CQ{dev: d, ring: r, User: u.(*rxe.CQ)}, nil
}

// Complete produces one completion, as the kernel's completer would, and
// reports false if the CQ is full. Completions of executed work are produced
// by the device itself; Complete is for completions a test makes up.
func (c *CQ) Complete(wc *rxe.WC) bool {
	c.dev.mu.Lock()
	defer c.dev.mu.Unlock()
	return c.push(wc)
}

// push produces one completion, reporting false if the CQ is full. The
// caller holds the device's lock.
func (c *CQ) push(wc *rxe.WC) bool {
	if c.ring.Room(c.prod, c.ring.Consumer()) == 0 {
		return false
	}
	writeWC(c.ring.Slot(c.prod), wc)
	c.prod = c.ring.Next(c.prod)
	c.ring.SetProducer(c.prod) // after the slot is written
	return true
}

// room is how many completions the CQ can still take.
func (c *CQ) room() int { return c.ring.Room(c.prod, c.ring.Consumer()) }

// QPSpec sizes a simulated queue pair.
type QPSpec struct {
	// Cap is the caps the simulated kernel grants; the rings get at
	// least MaxSendWR and MaxRecvWR slots (at least one each).
	Cap    uverbs.QPCap
	SigAll bool
	// Sink makes the doorbell take every posted send without executing or
	// completing it, so that a benchmark times the post path alone.
	Sink bool
}

// QP is the kernel side of a simulated RC queue pair.
type QP struct {
	dev            *Device
	num            uint32
	sq, rq         *ring.Ring
	sqCons, rqCons uint32
	sendCQ, recvCQ *CQ
	sigAll         bool
	sink           bool
	peer           *QP
	broken         bool // in the error state: work is flushed
	doorbells      atomic.Int64
	// User is the user side to post on.
	User *rxe.QP
}

// NewQP creates a queue pair whose send slots hold cfg.Limits (at least one
// SGE), like rxe_qp_init_req sizes them.
func (d *Device) NewQP(sendCQ, recvCQ *CQ, cfg QPSpec) (*QP, error) {
	lim := cfg.Cap
	sendRoom := max(int(lim.MaxSendSGE)*int(unsafe.Sizeof(rxe.SGE{})), int(lim.MaxInlineData), 16)
	recvRoom := max(int(lim.MaxRecvSGE), 1) * int(unsafe.Sizeof(rxe.SGE{}))
	sq, err := ring.Alloc(sendWQEHeader+sendRoom, max(int(lim.MaxSendWR), 1))
	if err != nil {
		return nil, err
	}
	rq, err := ring.Alloc(recvWQEHeader+recvRoom, max(int(lim.MaxRecvWR), 1))
	if err != nil {
		return nil, err
	}
	q := &QP{dev: d, sq: sq, rq: rq, sendCQ: sendCQ, recvCQ: recvCQ, sigAll: cfg.SigAll, sink: cfg.Sink}
	u, err := sim.NewQP(sq, rq, sim.Limits(lim), q.doorbell)
	if err != nil {
		return nil, err
	}
	q.User = u.(*rxe.QP)
	// Only a QP that works joins the device, so that Process never runs a
	// half-made one.
	d.mu.Lock()
	q.num = d.nextQPN
	d.nextQPN++
	d.qps = append(d.qps, q)
	d.mu.Unlock()
	return q, nil
}

// Num is the QP number.
func (q *QP) Num() uint32 { return q.num }

// Connect makes a and b each other's peer (loopback when a == b).
func Connect(a, b *QP) {
	a.dev.mu.Lock()
	a.peer, b.peer = b, a
	a.dev.mu.Unlock()
}

// Doorbells is how many doorbells the user side rang.
func (q *QP) Doorbells() int64 { return q.doorbells.Load() }

// doorbell is what the user side rings after posting: it runs the send
// queue at once (or, for a sink, takes the WQEs unread).
func (q *QP) doorbell() error {
	q.doorbells.Add(1)
	if q.sink {
		q.sq.SetConsumer(q.sq.Producer())
		return nil
	}
	q.dev.mu.Lock()
	q.runSend()
	q.dev.mu.Unlock()
	return nil
}

// SetError moves the QP to the error state, as a modify to ERR does: every
// posted receive and every unexecuted send completes with WR_FLUSH_ERR.
func (q *QP) SetError() {
	q.dev.mu.Lock()
	q.broken = true
	q.runSend()
	q.flushRecv()
	q.dev.mu.Unlock()
}

// Process runs every queue pair's send queue once more, as the kernel's
// retry timers would: sends that found no receive before go now.
func (d *Device) Process() {
	d.mu.Lock()
	for _, q := range d.qps {
		q.runSend()
		if q.broken {
			q.flushRecv()
		}
	}
	d.mu.Unlock()
}
