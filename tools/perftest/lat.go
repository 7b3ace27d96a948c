package main

import (
	"fmt"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// latRun is one latency run's state, allocated before the loop: one send
// request, one receive, the post timestamps and the sorting scratch.
type latRun struct {
	e      *end
	o      *options
	size   int
	iters  int
	wr     [1]qp.SendWR
	sge    [1]uverbs.SGE
	recv   [1]qp.RecvWR
	rsge   [1]uverbs.SGE
	posted []int64
	delta  []int64
	wc     [1]cq.WC
	clock  *durationClock
	// sampled counts the round trips in a timed run's window.
	sampled int
	stall   stallWatch
	yield   yielder
}

// newLatRun prepares a latency run of size bytes towards the peer's
// first QP (ctx_set_send_wqes for one QP and one request).
func newLatRun(e *end, rem dest, size int) *latRun {
	o := e.o
	l := &latRun{e: e, o: o, size: size, iters: o.iters}
	if o.durationMode() {
		l.clock = newDurationClock(o)
	} else {
		l.posted = newStamps(o.iters)
		l.delta = make([]int64, o.iters)
	}
	l.sge[0] = e.sge(0, size)
	w := qp.SendWR{ID: 0, SGEs: l.sge[:]}
	switch o.test.verb {
	case verbSend:
		w.Opcode = qp.Send
		if o.conn == qp.UD {
			w.AH, w.RemoteQPN, w.RemoteQKey = e.ahs[0], rem.qpn, e.qkey
		}
	case verbWrite:
		w.Opcode, w.RemoteAddr, w.RKey = qp.RDMAWrite, rem.vaddr, rem.rkey
	case verbRead:
		w.Opcode, w.RemoteAddr, w.RKey = qp.RDMARead, rem.vaddr, rem.rkey
	case verbAtomic:
		w.RemoteAddr, w.RKey = rem.vaddr, rem.rkey
		if o.atomic == atomicFetchAndAdd {
			w.Opcode, w.CompareAdd = qp.AtomicFetchAndAdd, 1
		} else {
			w.Opcode = qp.AtomicCmpAndSwp
		}
	}
	if (o.test.verb == verbSend || o.test.verb == verbWrite) && size <= o.inline {
		w.Flags |= qp.Inline
		w.SGEs, w.Inline = nil, e.buf.Bytes()[:size]
	}
	l.wr[0] = w
	// Receives land in the QP's window (after the GRH area for UD).
	rx := len(e.qps) * e.buffSize
	rlen := size
	if o.conn == qp.UD {
		rx += e.line - udAddition
		rlen += udAddition
	}
	l.rsge[0] = e.sge(rx, rlen)
	l.recv[0] = qp.RecvWR{ID: 0, SGEs: l.rsge[:]}
	return l
}

// stalled yields to the scheduler now and then (the latency loops spin
// only here) and says whether nothing has completed for stallLimit.
func (l *latRun) stalled() bool {
	l.yield.maybe()
	return l.stall.stalled()
}

func (l *latRun) stallError(what string, n int) error {
	return fmt.Errorf("%w for %v: %s %d of %d (does the peer run with the same parameters, -s, -n, -c?)", errStall, stallLimit, what, n, l.iters)
}

// ended says a timed run has ended.
func (l *latRun) ended() bool { return l.clock != nil && l.clock.current() == stateEnd }

// more says whether a counter has iterations left (always in a timed run
// until it ends).
func (l *latRun) more(cnt int) bool {
	if l.clock != nil {
		return !l.ended()
	}
	return cnt < l.iters
}

func (l *latRun) startClock() {
	if l.clock != nil {
		l.clock.start()
	}
}

func (l *latRun) stamp(i int) {
	if l.clock == nil {
		l.posted[i] = stamp()
	}
}

func (l *latRun) countSample() {
	if l.clock != nil && l.clock.current() == stateSample {
		l.sampled++
	}
}

// pollOne spins for one completion of c, checking it.
func (l *latRun) pollOne(c *cq.CQ, side string, n int) error {
	for {
		ne, err := c.Poll(l.wc[:])
		if err != nil {
			return fmt.Errorf("poll CQ failed: %w", err)
		}
		if ne > 0 {
			if w := &l.wc[0]; w.Status != cq.Success {
				return fmt.Errorf(" Completion with error at %s\n Failed status %d: wr_id %d syndrom 0x%x\n cnt=%d (%v)", side, w.Status, w.WRID, w.VendorErr, n, w.Status)
			}
			l.stall.progress()
			return nil
		}
		if l.ended() {
			return nil
		}
		if l.stalled() {
			return l.stallError("completed", n)
		}
	}
}

// write is run_iter_lat_write: each side RDMA-writes size bytes whose
// last byte counts the iterations into the peer's window and waits for
// the peer's write to change its own window's last byte; the server
// posts first.
func (l *latRun) write() error {
	e, o := l.e, l.o
	server := o.server == ""
	pollOff := len(e.qps)*e.buffSize + l.size - 1
	mem := e.buf.Bytes()
	l.wr[0].Flags |= qp.Signaled
	l.startClock()
	if l.clock != nil {
		defer l.clock.stop()
	}
	l.stall.progress()
	scnt, ccnt, rcnt := 0, 0, 0
	for l.more(scnt) || l.more(ccnt) || l.more(rcnt) {
		if l.more(rcnt) && !(scnt < 1 && server) {
			rcnt++
			want := byte(rcnt)
			for e.buf.LoadByte(pollOff) != want && !l.ended() {
				if l.stalled() {
					return l.stallError("received", rcnt-1)
				}
			}
			l.stall.progress()
		}
		if l.more(scnt) {
			l.stamp(scnt)
			scnt++
			mem[l.size-1] = byte(scnt)
			if err := e.qps[0].PostSend(l.wr[:]); err != nil {
				return fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
			}
		}
		if l.ended() {
			break
		}
		if l.more(ccnt) {
			if err := l.pollOne(e.sendCQ, "client", ccnt); err != nil {
				return err
			}
			ccnt++
			l.countSample()
		}
	}
	return nil
}

// readAtomic is run_iter_lat: only the client posts, one request at a
// time, and waits for its completion.
func (l *latRun) readAtomic() error {
	e, o := l.e, l.o
	l.wr[0].Flags |= qp.Signaled
	l.startClock()
	if l.clock != nil {
		defer l.clock.stop()
	}
	l.stall.progress()
	for scnt := 0; l.more(scnt); {
		l.stamp(scnt)
		scnt++
		if err := e.qps[0].PostSend(l.wr[:]); err != nil {
			return fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
		}
		if l.ended() {
			break
		}
		if o.events {
			if err := l.waitEvent(forSend, "completion", scnt); err != nil {
				return err
			}
		}
		if err := l.pollOne(e.sendCQ, "client", scnt); err != nil {
			return err
		}
		l.countSample()
	}
	return nil
}

// send is run_iter_lat_send: a SEND ping-pong; the client sends first,
// each receive is re-posted while more are due, and every cq_mod-th send
// (every send, with the latency tests' tx depth of 1) is waited for.
func (l *latRun) send() error {
	e, o := l.e, l.o
	client := o.server != ""
	started := false
	if l.clock != nil {
		defer l.clock.stop()
	}
	l.wr[0].Flags &^= qp.Signaled
	l.stall.progress()
	scnt, rcnt := 0, 0
	for l.more(scnt) || l.more(rcnt) {
		if l.more(rcnt) && !(scnt < 1 && client) {
			if o.events {
				if err := l.waitEvent(forRecv, "receive", rcnt+1); err != nil {
					return err
				}
			}
			if err := l.pollOne(e.recvCQ, "server", rcnt); err != nil {
				return err
			}
			if l.ended() {
				break
			}
			if !started {
				started = true
				l.startClock()
			}
			rcnt++
			l.countSample()
			if l.clock != nil || rcnt+o.rxDepth <= l.iters {
				if err := e.qps[0].PostRecv(l.recv[:]); err != nil {
					return fmt.Errorf("Couldn't post recv: rcnt=%d: %w", rcnt, err)
				}
			}
		}
		if l.more(scnt) {
			l.stamp(scnt)
			scnt++
			poll := scnt%o.cqMod == 0 || (l.clock == nil && scnt == l.iters)
			if poll {
				l.wr[0].Flags |= qp.Signaled
			}
			if err := e.qps[0].PostSend(l.wr[:]); err != nil {
				return fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
			}
			if poll {
				if o.events {
					if err := l.waitEvent(forSend, "send completion", scnt); err != nil {
						return err
					}
				}
				if err := l.pollOne(e.sendCQ, "client", scnt); err != nil {
					return err
				}
				l.wr[0].Flags &^= qp.Signaled
			}
		}
	}
	return nil
}

// postReceives posts rx_depth receives (ctx_set_recv_wqes for one QP).
func (l *latRun) postReceives() error {
	for j := range l.o.rxDepth {
		if err := l.e.qps[0].PostRecv(l.recv[:]); err != nil {
			return fmt.Errorf("Couldn't post recv Qp = 0: counter=%d: %w", j, err)
		}
	}
	return nil
}

// waitEvent sleeps until a CQ event, acknowledges it and re-arms that
// CQ; what and n say in a stall's error what the run was waiting for.
func (l *latRun) waitEvent(k waitKind, what string, n int) error {
	if _, err := l.e.events.wait(k); err != nil {
		return fmt.Errorf("%w: waiting for %s %d of %d (does the peer run with the same parameters, -s, -n, -c?)", err, what, n, l.iters)
	}
	return nil
}

// print writes the run's row.
func (l *latRun) print(w interface{ Write([]byte) (int, error) }) {
	if l.clock != nil {
		printLatDuration(w, l.o, l.size, l.sampled, l.clock.sampleStop-l.clock.sampleStart)
		return
	}
	if !l.o.cycles {
		stampsToNanos(l.posted)
	}
	printLatReport(w, l.o, l.size, l.iters, latReportOf(l.o, l.posted, l.delta))
}
