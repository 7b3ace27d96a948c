package rsocket

import (
	"errors"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// res is what a connection is built of. One mapped buffer holds, in
// order, the receive ring and the target list (registered for the peer's
// RDMA WRITEs), then the send ring and the control slots (registered for
// local access only).
type res struct {
	rc     *rdmacm.Conn // nil until connected
	pd     *uverbs.PD
	ch     *cq.Channel
	cq     *cq.CQ
	q      *qp.QP
	buf    *uverbs.Buffer
	rmr    *uverbs.MR
	smr    *uverbs.MR
	iomrs  []iomapMR      // IOMap's registrations
	rw     *fdwait.Poller // Read's and Close's waits; see wait.go
	ww     *fdwait.Poller // Write's and CloseWrite's
	mem    []byte
	sq     int
	rq     int
	inline int
	poll   time.Duration // Options.PollTime; ≤ 0: none

	rbufLen, sbufLen int
	targetOff        int // the target list, after the ring
	targetLen        int // the target list and the iomap table, padded
	iomapSize        int
	sbufOff          int
}

const (
	// ctrlLen is the control slots' room: one SGL entry each.
	ctrlLen = ctrlSlots * sgeLen
)

// newRes builds the connection's PD, completion channel, CQ, QP (in
// RESET), buffer and memory regions, and its two completion waiters.
func newRes(devctx *uverbs.Context, s sizes) (_ *res, err error) {
	r := &res{sq: s.sq, rq: s.rq, rbufLen: s.rbuf, sbufLen: s.sbuf, iomapSize: s.iomap, poll: s.poll}
	defer func() {
		if err != nil {
			r.release()
		}
	}()
	if r.pd, err = devctx.AllocPD(); err != nil {
		return nil, err
	}
	if r.ch, err = cq.NewChannel(devctx); err != nil {
		return nil, err
	}
	if r.cq, err = cq.New(devctx, s.sq+s.rq, r.ch); err != nil {
		return nil, err
	}
	r.q, err = qp.New(r.pd, qp.Spec{
		Type: qp.RC, SendCQ: r.cq, RecvCQ: r.cq, SigAll: true,
		Cap: qp.Cap{MaxSendWR: uint32(s.sq), MaxRecvWR: uint32(s.rq), MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: uint32(s.inline)},
	})
	if err != nil {
		return nil, err
	}
	r.inline = min(s.inline, int(r.q.Cap().MaxInlineData))
	r.layout()
	if r.buf, err = uverbs.NewBuffer(r.sbufOff+r.sbufLen+ctrlLen, uverbs.BufferOptions{}); err != nil {
		return nil, err
	}
	r.mem = r.buf.Bytes()
	if r.rmr, err = r.pd.RegisterMRRange(r.buf, 0, r.sbufOff, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite); err != nil {
		return nil, err
	}
	if r.smr, err = r.pd.RegisterMRRange(r.buf, r.sbufOff, r.sbufLen+ctrlLen, uverbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	if r.rw, err = r.newWaiter(s.thread); err != nil {
		return nil, err
	}
	if r.ww, err = r.newWaiter(s.thread); err != nil {
		return nil, err
	}
	return r, nil
}

// layout places the target list and iomap table after the ring, and the
// send ring after them.
func (r *res) layout() {
	r.targetOff = (r.rbufLen + 63) &^ 63
	r.targetLen = (targetSGEs*sgeLen + r.iomapSize*iomapLen + 63) &^ 63
	r.sbufOff = r.targetOff + r.targetLen
}

func (r *res) iomapTable() []byte {
	start := r.targetOff + targetSGEs*sgeLen
	return r.mem[start : start+r.iomapSize*iomapLen]
}
func (r *res) rbuf() []byte       { return r.mem[:r.rbufLen] }
func (r *res) targetList() []byte { return r.mem[r.targetOff : r.targetOff+targetSGEs*sgeLen] }
func (r *res) sbuf() []byte       { return r.mem[r.sbufOff : r.sbufOff+r.sbufLen] }
func (r *res) ctrl() []byte       { return r.mem[r.sbufOff+r.sbufLen : r.sbufOff+r.sbufLen+ctrlLen] }
func (r *res) rbufAddr() uint64   { return r.rmr.Addr() }
func (r *res) targetAddr() uint64 { return r.rmr.Addr() + uint64(r.targetOff) }
func (r *res) sbufAddr() uint64   { return r.smr.Addr() }
func (r *res) ctrlAddr() uint64   { return r.smr.Addr() + uint64(r.sbufLen) }

// release destroys what newRes built, in dependency order, then the CM
// connection (which may close the device context with it). Each part is
// released once; it is safe on a partly built res.
func (r *res) release() error {
	var errs []error
	add := func(err error) {
		if err != nil && !errors.Is(err, uverbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if r.rw != nil {
		add(r.rw.Close())
		r.rw = nil
	}
	if r.ww != nil {
		add(r.ww.Close())
		r.ww = nil
	}
	if r.q != nil {
		add(r.q.Close())
		r.q = nil
	}
	for _, m := range r.iomrs {
		add(m.mr.Close())
	}
	r.iomrs = nil
	if r.rmr != nil {
		add(r.rmr.Close())
		r.rmr = nil
	}
	if r.smr != nil {
		add(r.smr.Close())
		r.smr = nil
	}
	if r.buf != nil {
		r.mem = nil
		add(r.buf.Close())
		r.buf = nil
	}
	if r.cq != nil {
		add(r.cq.Close())
		r.cq = nil
	}
	if r.ch != nil {
		add(r.ch.Close())
		r.ch = nil
	}
	if r.pd != nil {
		add(r.pd.Close())
		r.pd = nil
	}
	if r.rc != nil {
		add(r.rc.Close())
		r.rc = nil
	}
	return errors.Join(errs...)
}

// postRecvs fills the receive queue with empty receives: every message
// of the protocol is an immediate, its data lands by RDMA WRITE.
func (r *res) postRecvs(wrs []qp.RecvWR) error { return r.q.PostRecv(wrs) }
