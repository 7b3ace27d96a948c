package rxesim

import "github.com/pureverbs/pureverbs/rxe"

// runSend executes the published send WQEs in order, completing each into
// the send CQ (always when it failed, else when signaled). A failure moves
// the QP to the error state, as in the kernel, and flushes what follows.
// It returns early while the peer has no receive or a CQ has no room. The
// caller holds d.mu.
func (q *QP) runSend() {
	for q.sqCons != q.sq.Producer() && q.sendCQ.room() > 0 {
		wqe, ok := readSend(q.sq.Slot(q.sqCons))
		status := rxe.WCLocQPOpErr
		switch {
		case !ok:
		case q.broken:
			status = rxe.WCWRFlushErr
		default:
			var stall bool
			if status, stall = q.execute(&wqe); stall {
				return
			}
		}
		if status != rxe.WCSuccess || q.sigAll || wqe.flags&rxe.Signaled != 0 {
			q.sendCQ.push(&rxe.WC{
				WRID:    wqe.id,
				Status:  status,
				Opcode:  sendWCOpcode(wqe.opcode),
				ByteLen: wqe.length,
				QPNum:   q.num,
			})
		}
		if status != rxe.WCSuccess && status != rxe.WCWRFlushErr {
			q.broken = true
			q.flushRecv()
		}
		q.sqCons = q.sq.Next(q.sqCons)
		q.sq.SetConsumer(q.sqCons) // after the WQE was read
	}
}

// flushRecv completes every posted receive with WR_FLUSH_ERR.
func (q *QP) flushRecv() {
	for q.rqCons != q.rq.Producer() && q.recvCQ.room() > 0 {
		wqe, _ := readRecv(q.rq.Slot(q.rqCons))
		q.recvCQ.push(&rxe.WC{WRID: wqe.id, Status: rxe.WCWRFlushErr, Opcode: rxe.WCRecv, QPNum: q.num})
		q.rqCons = q.rq.Next(q.rqCons)
		q.rq.SetConsumer(q.rqCons)
	}
}

func sendWCOpcode(op rxe.Opcode) rxe.WCOpcode {
	switch op {
	case rxe.OpRDMAWrite, rxe.OpRDMAWriteWithImm:
		return rxe.WCRDMAWrite
	case rxe.OpRDMARead:
		return rxe.WCRDMARead
	}
	return rxe.WCSend
}

// execute runs one send WQE against the peer and returns the sender's
// status, or stall when it must wait for a receive or CQ room.
func (q *QP) execute(wr *sendWQE) (status rxe.WCStatus, stall bool) {
	d, p := q.dev, q.peer
	if p == nil || p.broken {
		return rxe.WCRetryExcErr, false // nobody answers
	}
	local := cursor{d: d, sges: wr.sges}
	if wr.flags&rxe.Inline != 0 {
		local = cursor{d: d, flat: wr.inline, isFlat: true}
	} else if !d.valid(wr.sges) {
		return rxe.WCLocProtErr, false
	}
	var remote cursor
	if wr.opcode != rxe.OpSend && wr.opcode != rxe.OpSendWithImm {
		b, ok := d.span(wr.remoteAddr, wr.length, wr.rkey)
		if !ok {
			return rxe.WCRemAccessErr, false
		}
		remote = cursor{d: d, flat: b, isFlat: true}
	}
	if wr.opcode == rxe.OpRDMARead {
		transfer(&local, &remote)
		return rxe.WCSuccess, false
	}
	if wr.opcode == rxe.OpRDMAWrite {
		transfer(&remote, &local)
		return rxe.WCSuccess, false
	}
	// The rest consume a receive of the peer.
	if p.rqCons == p.rq.Producer() || p.recvCQ.room() == 0 {
		return 0, true
	}
	recv, ok := readRecv(p.rq.Slot(p.rqCons))
	wc := rxe.WC{WRID: recv.id, Opcode: rxe.WCRecv, ByteLen: wr.length, QPNum: p.num, SrcQP: q.num}
	if wr.opcode == rxe.OpSendWithImm || wr.opcode == rxe.OpRDMAWriteWithImm {
		wc.Imm, wc.Flags = wr.imm, rxe.WCWithImm
	}
	switch {
	case !ok || !d.valid(recv.sges):
		wc.Status, status = rxe.WCLocProtErr, rxe.WCRemOpErr
	case wr.opcode == rxe.OpRDMAWriteWithImm:
		wc.Opcode = rxe.WCRecvRDMAWithImm
		transfer(&remote, &local)
	case wr.length > recv.length:
		wc.Status, status = rxe.WCLocLenErr, rxe.WCRemInvReqErr
	default:
		dst := cursor{d: d, sges: recv.sges}
		transfer(&dst, &local)
	}
	p.recvCQ.push(&wc)
	p.rqCons = p.rq.Next(p.rqCons)
	p.rq.SetConsumer(p.rqCons)
	if wc.Status != rxe.WCSuccess {
		p.broken = true
		p.flushRecv()
	}
	return status, false
}

// span resolves length bytes at addr in the memory registered under key.
func (d *Device) span(addr uint64, length uint32, key uint32) ([]byte, bool) {
	buf, ok := d.mrs[key]
	if !ok {
		return nil, false
	}
	base := Addr(buf)
	if addr < base || addr-base > uint64(len(buf)) || uint64(length) > uint64(len(buf))-(addr-base) {
		return nil, false
	}
	off := addr - base
	return buf[off : off+uint64(length)], true
}

// valid reports whether every SGE names registered memory.
func (d *Device) valid(sges []rxe.SGE) bool {
	for _, s := range sges {
		if _, ok := d.span(s.Addr, s.Length, s.LKey); !ok {
			return false
		}
	}
	return true
}

// cursor walks a scatter/gather list (already validated) or one flat range
// chunk by chunk, without building a list of slices.
type cursor struct {
	d      *Device
	sges   []rxe.SGE
	flat   []byte
	isFlat bool
	cur    []byte
}

// chunk returns the next bytes to read or fill, nil at the end.
func (c *cursor) chunk() []byte {
	for len(c.cur) == 0 {
		switch {
		case c.isFlat:
			c.cur, c.isFlat = c.flat, false
			if len(c.cur) == 0 {
				return nil
			}
		case len(c.sges) == 0:
			return nil
		default:
			s := c.sges[0]
			c.cur, _ = c.d.span(s.Addr, s.Length, s.LKey)
			c.sges = c.sges[1:]
		}
	}
	return c.cur
}

// transfer copies from src to dst until either ends.
func transfer(dst, src *cursor) {
	for {
		s, t := src.chunk(), dst.chunk()
		if s == nil || t == nil {
			return
		}
		n := copy(t, s)
		src.cur, dst.cur = s[n:], t[n:]
	}
}
