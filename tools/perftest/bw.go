package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// pollBatch is perftest's CTX_POLL_BATCH.
const pollBatch = 16

// stallLimit ends a run whose completions stopped: the peer died, or its
// parameters differ (other sizes, fewer iterations) and it will never
// send or acknowledge what this side waits for.
var stallLimit = 30 * time.Second

// errStall is the error of a run that stalled.
var errStall = errors.New("no completion")

// bwRun is one bandwidth run's state, all of it allocated before the
// measured loop: per QP the work requests (post_list of them) and their
// SGEs, a receive request, counters and addresses; the timestamps; the
// poll batch.
type bwRun struct {
	e       *end
	o       *options
	size    int
	iters   int // per QP; ignored in duration mode
	wrs     [][]qp.SendWR
	sges    [][]uverbs.SGE
	recv    [][1]qp.RecvWR
	rsge    [][1]uverbs.SGE
	scnt    []int
	ccnt    []int
	rposted []int
	myAddr  []uint64
	remAddr []uint64
	rxAddr  []uint64
	times   bwTimes
	wc      [pollBatch]cq.WC
	clock   *durationClock
	// totS, totC and totR count requests posted, completed and
	// received over all QPs; tot is what the run posts in all.
	totS, totC, totR, tot int
	// recvPolling says a failed completion came from the receive CQ.
	recvPolling bool
	// sampled counts the completions in a timed run's sampling window.
	sampled int
	stall   stallWatch
	yield   yielder
}

// newBWRun prepares a run of size-byte messages to the peer's QPs rem
// (ctx_set_send_wqes and the receive side of ctx_set_recv_wqes).
func newBWRun(e *end, rem []dest, size int) (*bwRun, error) {
	o := e.o
	n := len(e.qps)
	r := &bwRun{
		e: e, o: o, size: size, iters: o.iters,
		wrs: make([][]qp.SendWR, n), sges: make([][]uverbs.SGE, n),
		recv: make([][1]qp.RecvWR, n), rsge: make([][1]uverbs.SGE, n),
		scnt: make([]int, n), ccnt: make([]int, n), rposted: make([]int, n),
		myAddr: make([]uint64, n), remAddr: make([]uint64, n), rxAddr: make([]uint64, n),
	}
	if o.durationMode() {
		r.clock = newDurationClock(o)
	}
	samples := 1
	if !o.noPeak {
		samples = o.iters * n
	}
	r.times = bwTimes{posted: newStamps(samples), completed: newStamps(samples)}
	base := e.mr.Addr()
	for i := range n {
		r.myAddr[i] = base + uint64(i*e.buffSize)
		r.remAddr[i] = rem[i].vaddr
		r.sges[i] = make([]uverbs.SGE, o.postList)
		r.wrs[i] = make([]qp.SendWR, o.postList)
		addr, raddr := r.myAddr[i], r.remAddr[i]
		for j := range o.postList {
			if j > 0 && size <= e.cycle/2 {
				addr = r.nextAddr(addr, j-1, r.myAddr[i])
				raddr = r.nextAddr(raddr, j-1, r.remAddr[i])
			}
			r.sges[i][j] = uverbs.SGE{Addr: addr, Length: uint32(size), LKey: e.mr.LKey()}
			wr := qp.SendWR{ID: uint64(i), SGEs: r.sges[i][j : j+1]}
			if (j+1)%o.cqMod == 0 {
				wr.Flags = qp.Signaled
			}
			switch o.test.verb {
			case verbSend:
				wr.Opcode = qp.Send
				if o.conn == qp.UD {
					wr.AH, wr.RemoteQPN, wr.RemoteQKey = e.ahs[i], rem[i].qpn, e.qkey
				}
			case verbWrite:
				wr.Opcode, wr.RemoteAddr, wr.RKey = qp.RDMAWrite, raddr, rem[i].rkey
			case verbRead:
				wr.Opcode, wr.RemoteAddr, wr.RKey = qp.RDMARead, raddr, rem[i].rkey
			case verbAtomic:
				wr.RemoteAddr, wr.RKey = raddr, rem[i].rkey
				if o.atomic == atomicFetchAndAdd {
					wr.Opcode, wr.CompareAdd = qp.AtomicFetchAndAdd, 1
				} else {
					wr.Opcode, wr.CompareAdd, wr.Swap = qp.AtomicCmpAndSwp, 0, 0
				}
			}
			if (o.test.verb == verbSend || o.test.verb == verbWrite) && size <= o.inline {
				wr.Flags |= qp.Inline
				wr.Inline = e.buf.Bytes()[addr-base : addr-base+uint64(size)]
				wr.SGEs = nil
			}
			r.wrs[i][j] = wr
		}
		// The receive side: this QP's target window (shifted so a UD
		// payload lands on a cache line after its GRH).
		r.rxAddr[i] = base + uint64((n+i)*e.buffSize)
		rlen := size
		if o.conn == qp.UD {
			r.rxAddr[i] += uint64(e.line - udAddition)
			rlen += udAddition
		}
		r.rsge[i][0] = uverbs.SGE{Addr: r.rxAddr[i], Length: uint32(rlen), LKey: e.mr.LKey()}
		r.recv[i][0] = qp.RecvWR{ID: uint64(i), SGEs: r.rsge[i][:]}
	}
	return r, nil
}

// nextAddr is increase_loc_addr/increase_rem_addr: the next message's
// address, one INC further, back at the start every cycle/INC messages.
func (r *bwRun) nextAddr(addr uint64, cnt int, start uint64) uint64 {
	step := inc(r.size, r.e.line)
	addr += uint64(step)
	if (cnt+1)%(r.e.cycle/step) == 0 {
		addr = start
	}
	return addr
}

// recvSize is the bytes a receive takes: UD adds its GRH.
func (r *bwRun) recvSize() int {
	if r.o.conn == qp.UD {
		return r.size + udAddition
	}
	return r.size
}

// postReceives is ctx_set_recv_wqes: rx_depth receives per QP, stepping
// through the window when messages are small.
func (r *bwRun) postReceives() error {
	depth := r.o.rxDepth
	for i, q := range r.e.qps {
		r.rposted[i] = depth
		for j := range depth {
			if err := q.PostRecv(r.recv[i][:]); err != nil {
				return fmt.Errorf("Couldn't post recv Qp = %d: counter=%d: %w", i, j, err)
			}
			if r.recvSize() <= r.e.cycle/2 {
				r.rsge[i][0].Addr = r.nextAddr(r.rsge[i][0].Addr, j, r.rxAddr[i])
			}
		}
		r.rsge[i][0].Addr = r.rxAddr[i]
	}
	return nil
}

// waitEvent is ctx_notify_events: sleep until a CQ of the channel has an
// event, acknowledge it and re-arm that CQ.
func (r *bwRun) waitEvent(k waitKind) error {
	_, err := r.e.events.wait(k)
	return err
}

func (r *bwRun) stallError(what string, done, want int) error {
	return fmt.Errorf("%w for %v: %s %d of %d (does the peer run with the same parameters, -s, -n, -q, -c?)", errStall, stallLimit, what, done, want)
}

// running says whether a timed run is still going.
func (r *bwRun) running() bool { return r.clock != nil && r.clock.current() != stateEnd }

// sendSide posts on QP i while the send queue has room, as run_iter_bw's
// inner loop does, and returns how many it posted.
func (r *bwRun) sendSide(i int) (int, error) {
	o := r.o
	posted := 0
	timed := r.clock != nil
	for (r.scnt[i] < r.iters || timed) && r.scnt[i]-r.ccnt[i]+o.postList <= o.txDepth {
		wr := &r.wrs[i][0]
		if o.postList == 1 && r.scnt[i]%o.cqMod == 0 && o.cqMod > 1 && !(r.scnt[i] == r.iters-1 && !timed) {
			wr.Flags &^= qp.Signaled
		}
		if !o.noPeak {
			r.times.posted[r.totS] = stamp()
		}
		if timed && r.clock.current() == stateEnd {
			break
		}
		if err := r.e.qps[i].PostSend(r.wrs[i]); err != nil {
			return posted, fmt.Errorf("Couldn't post send: qp %d scnt=%d: %w", i, r.scnt[i], err)
		}
		if o.postList == 1 && r.size <= r.e.cycle/2 {
			r.sges[i][0].Addr = r.nextAddr(r.sges[i][0].Addr, r.scnt[i], r.myAddr[i])
			if wr.Inline != nil {
				off := r.sges[i][0].Addr - r.e.mr.Addr()
				wr.Inline = r.e.buf.Bytes()[off : off+uint64(r.size)]
			}
			if o.test.verb != verbSend {
				wr.RemoteAddr = r.nextAddr(wr.RemoteAddr, r.scnt[i], r.remAddr[i])
			}
		}
		r.scnt[i] += o.postList
		r.totS += o.postList
		posted += o.postList
		if o.postList == 1 && (r.scnt[i]%o.cqMod == o.cqMod-1 || (!timed && r.scnt[i] == r.iters-1)) {
			wr.Flags |= qp.Signaled
		}
	}
	return posted, nil
}

// pollSends takes send completions (each counts cq_mod requests) and
// records when they arrived; on a CQ shared with the receives (-R) it
// takes those too.
func (r *bwRun) pollSends(tot int) (int, error) {
	r.tot = tot
	ne, err := r.e.sendCQ.Poll(r.wc[:])
	if err != nil {
		return 0, fmt.Errorf("poll CQ failed: %w", err)
	}
	for k := range ne {
		if err := r.complete(&r.wc[k], nil); err != nil {
			return 0, err
		}
	}
	if ne > 0 {
		r.stall.progress()
	}
	return ne, nil
}

// complete handles one completion, a send's or a receive's.
func (r *bwRun) complete(w *cq.WC, onFirst func()) error {
	if w.Opcode.IsRecv() || (w.Status != cq.Success && r.e.sendCQ != r.e.recvCQ && r.recvPolling) {
		return r.received(w, onFirst)
	}
	o := r.o
	if w.Status != cq.Success {
		return fmt.Errorf(" Completion with error at client\n Failed status %d: wr_id %d syndrom 0x%x\n scnt=%d, ccnt=%d (%v)", w.Status, w.WRID, w.VendorErr, r.totS, r.totC, w.Status)
	}
	id := int(w.WRID)
	r.ccnt[id] += o.cqMod
	r.totC += o.cqMod
	if !o.noPeak {
		if r.totC > r.tot {
			r.times.completed[r.tot-1] = stamp()
		} else {
			r.times.completed[r.totC-1] = stamp()
		}
	}
	if r.clock != nil && r.clock.current() == stateSample {
		r.sampled += o.cqMod
	}
	return nil
}

// pollRecvs takes receive completions and re-posts while more messages
// are due (run_iter_bw_server's inner loop); onFirst runs at the first.
// On a CQ shared with the sends (-R) it takes those too.
func (r *bwRun) pollRecvs(onFirst func()) (int, error) {
	r.recvPolling = true
	defer func() { r.recvPolling = false }()
	ne, err := r.e.recvCQ.Poll(r.wc[:])
	if err != nil {
		return 0, fmt.Errorf("Poll Receive CQ failed: %w", err)
	}
	for k := range ne {
		if err := r.complete(&r.wc[k], onFirst); err != nil {
			return 0, err
		}
	}
	if ne > 0 {
		r.stall.progress()
	}
	return ne, nil
}

// received handles one receive completion.
func (r *bwRun) received(w *cq.WC, onFirst func()) error {
	if r.totR == 0 && onFirst != nil {
		onFirst()
	}
	if w.Status != cq.Success {
		return fmt.Errorf(" Completion with error at server\n Failed status %d: wr_id %d syndrom 0x%x\n rcnt=%d (%v)", w.Status, w.WRID, w.VendorErr, r.totR, w.Status)
	}
	id := int(w.WRID)
	r.totR++
	timed := r.clock != nil
	if timed && r.clock.current() == stateSample {
		r.sampled++
	}
	if timed || r.rposted[id]+1 <= r.iters {
		if err := r.e.qps[id].PostRecv(r.recv[id][:]); err != nil {
			return fmt.Errorf("Couldn't post recv Qp=%d rcnt=%d: %w", id, r.totR, err)
		}
		r.rposted[id]++
		if r.recvSize() <= r.e.cycle/2 {
			r.rsge[id][0].Addr = r.nextAddr(r.rsge[id][0].Addr, r.rposted[id]-1, r.rxAddr[id])
		}
	}
	return nil
}

// client is run_iter_bw: keep tx_depth requests outstanding on every QP
// until each has posted and completed its iterations (or the timed run
// ends), then the report's timestamps are in r.times.
func (r *bwRun) client() error {
	o := r.o
	n := len(r.e.qps)
	tot := r.iters * n
	if r.clock != nil {
		tot = 0
		r.clock.start()
		defer r.clock.stop()
	}
	if o.noPeak && r.clock == nil {
		r.times.posted[0] = stamp()
	}
	r.stall.progress()
	for r.totS < tot || r.totC < tot || r.running() {
		r.yield.maybe()
		for i := range n {
			if _, err := r.sendSide(i); err != nil {
				return err
			}
		}
		if r.totC < tot || (r.clock != nil && r.totC < r.totS) {
			if o.events {
				if err := r.waitEvent(forSend); err != nil {
					return err
				}
			}
			ne, err := r.pollSends(tot)
			if err != nil {
				return err
			}
			if ne == 0 && r.stall.stalled() {
				return r.stallError("completed", r.totC, tot)
			}
		}
	}
	if o.noPeak && r.clock == nil {
		r.times.completed[0] = stamp()
	}
	return nil
}

// server is run_iter_bw_server: receive every QP's iterations (or until
// the timed run ends, timed from the first message), re-posting receives
// while more are due.
func (r *bwRun) server() error {
	o := r.o
	tot := r.iters * len(r.e.qps)
	if r.clock != nil {
		tot = 0
		defer r.clock.stop()
	}
	first := func() {
		if r.clock != nil {
			r.clock.start()
		} else {
			r.times.posted[0] = stamp()
		}
	}
	r.stall.progress()
	for r.totR < tot || r.running() {
		r.yield.maybe()
		if o.events {
			if err := r.waitEvent(forRecv); err != nil {
				return err
			}
		}
		for {
			if r.clock != nil && r.clock.current() == stateEnd {
				break
			}
			ne, err := r.pollRecvs(first)
			if err != nil {
				return err
			}
			if ne == 0 {
				break
			}
		}
		if r.totR < tot && r.stall.stalled() {
			return r.stallError("received", r.totR, tot)
		}
		if r.clock != nil && r.totR == 0 && r.stall.stalled() {
			return r.stallError("received", 0, 1)
		}
	}
	if r.clock == nil {
		r.times.completed[0] = stamp()
	}
	return nil
}

// bidirectional is run_iter_bi for SEND: both ends send and receive at
// once; the server starts sending at its first receive.
func (r *bwRun) bidirectional() error {
	o := r.o
	n := len(r.e.qps)
	tot := r.iters * n
	client := o.server != ""
	sending := client
	if r.clock != nil {
		tot = 0
		if client {
			r.clock.start()
		}
		defer r.clock.stop()
	}
	if o.noPeak {
		r.times.posted[0] = stamp()
	}
	// With -R one CQ takes sends and receives: pollRecvs may complete a
	// send before pollSends has ever set the total.
	r.tot = tot
	first := func() {
		if !sending {
			sending = true
			if r.clock != nil {
				r.clock.start()
			}
		}
	}
	r.stall.progress()
	for r.running() || r.totC < tot || r.totR < tot {
		r.yield.maybe()
		if sending {
			for i := range n {
				if _, err := r.sendSide(i); err != nil {
					return err
				}
			}
		}
		if o.events {
			if err := r.waitEvent(forRecv); err != nil {
				return err
			}
		}
		nr, err := r.pollRecvs(first)
		if err != nil {
			return err
		}
		ns := 0
		if r.totC < tot || (r.clock != nil && r.totC < r.totS) {
			if ns, err = r.pollSends(tot); err != nil {
				return err
			}
		}
		if nr == 0 && ns == 0 && r.stall.stalled() {
			return r.stallError("received", r.totR, tot)
		}
	}
	if o.noPeak && r.clock == nil {
		r.times.completed[0] = stamp()
	}
	return nil
}

// report is this run's figures: in a timed run the sampled window and
// the completions in it.
func (r *bwRun) report() bwReport {
	if r.clock != nil {
		t := bwTimes{posted: []int64{r.clock.sampleStart}, completed: []int64{r.clock.sampleStop}}
		return bwReportOf(r.o, &t, r.size, r.sampled)
	}
	stampsToNanos(r.times.posted)
	stampsToNanos(r.times.completed)
	return bwReportOf(r.o, &r.times, r.size, r.iters)
}

// sge is one SGE of the buffer, used by the latency loops.
func (e *end) sge(off, length int) uverbs.SGE {
	return uverbs.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(length), LKey: e.mr.LKey()}
}
