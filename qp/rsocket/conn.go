package rsocket

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

// Connection state bits, as rsocket keeps them: connected until either
// side disconnects; readable until the peer shuts down its sending side;
// writable until this side does.
const (
	stConnected = 1 << iota
	stReadable
	stWritable
)

// recvID tags receive work requests; a send's ID is its message.
const recvID = 1 << 63

// lingerTime bounds how long Close waits for its last messages to be
// acknowledged before it tears the queue pair down.
const lingerTime = 3 * time.Second

// Conn is a stream connection speaking librdmacm's rsocket protocol. It
// implements net.Conn. Read and Write may run at the same time from two
// goroutines; concurrent Reads (or Writes) are serialised. Whichever call is
// waiting drives the completion queue: no goroutine of the package is
// needed for data to move.
type Conn struct {
	readMu, writeMu sync.Mutex

	// mu guards the protocol state below and every use of the QP and CQ.
	mu     sync.Mutex
	state  int
	closed bool
	// err is the connection's failure (a completion error, a protocol
	// violation), reported once the data received before it is read.
	err error
	// armed is whether the CQ has been asked for an event since the last
	// one was taken.
	armed                       bool
	readDeadline, writeDeadline time.Time
	// readParked and writeParked say a Read or Write waits in its
	// waiter; readKicked and writeKicked that kick woke it.
	readParked, writeParked bool
	readKicked, writeKicked bool
	// ctrlParked says CloseWrite or Close waits for a control slot or
	// for its sends to complete.
	ctrlParked bool

	r res

	local, remote *net.TCPAddr

	// The receive side. rmsg queues the lengths of data messages not yet
	// read (a ring of rq+1); rbufOffset is where reading goes on in the
	// ring, rbufFree the next half to hand out, rbufAvail the bytes read
	// and not yet handed out again.
	rmsg                 []uint32
	rmsgHead, rmsgTail   int
	rbufOffset, rbufFree int
	rbufAvail            int
	rseqNo, rseqComp     uint16
	// remoteSGL is the peer's target list; remoteSGE the entry the next
	// handed-out half goes to; peerOrder the byte order it wants.
	remoteSGL sge
	remoteSGE int
	peerOrder binary.ByteOrder

	// The send side. target holds the two ring halves the peer has
	// handed out (copied from the target list when their SGL message
	// arrives); targetSGE is the one being filled, targetFill the entry
	// the peer's next half lands in.
	target                [targetSGEs]sge
	targetSGE, targetFill int
	sseqNo, sseqComp      uint16
	sqeAvail, sbufAvail   int
	sbufTail              int
	ctrlSeq, ctrlMax      uint16

	// iomaps are the peer's mappings (its entries in this side's iomap
	// table, copied when their message arrives); peerIOMap is the peer's
	// table and peerIOMapUsed its entries this side has filled.
	iomaps        []iomapEntry
	peerIOMap     sge
	peerIOMapUsed []bool

	// Scratch, allocated once, so that Read and Write allocate nothing.
	wc         [32]cq.WC
	swr        [1]qp.SendWR
	ssge       [2]uverbs.SGE
	rwr        []qp.RecvWR
	readReady  func() bool
	writeReady func() bool
	sendsDone  func() bool

	cmStop context.CancelFunc
	cmDone chan struct{}
	alive  *time.Timer
}

// Read reads data the peer sent. It waits until some is there, the peer
// shuts down (io.EOF once everything before it is read), the read deadline
// passes (os.ErrDeadlineExceeded) or the connection is closed
// (net.ErrClosed).
func (c *Conn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, c.opErr("read", net.ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if passed(c.readDeadline) {
		return 0, c.opErr("read", os.ErrDeadlineExceeded)
	}
	if c.rmsgHead == c.rmsgTail {
		c.progress()
		c.poll(c.readable, &c.readDeadline)
		if c.closed {
			return 0, c.opErr("read", net.ErrClosed)
		}
		for !c.readable() {
			if passed(c.readDeadline) {
				// A wait would end at once: look again without arming
				// the CQ, whose event would then come for no one.
				if c.progress(); !c.readable() {
					return 0, c.opErr("read", os.ErrDeadlineExceeded)
				}
				break
			}
			c.readParked = true
			deadline := c.readDeadline
			c.mu.Unlock()
			err := c.r.waitCompletions(c.r.rw, deadline, c.readReady)
			c.mu.Lock()
			c.readParked, c.readKicked = false, false
			if c.closed {
				return 0, c.opErr("read", net.ErrClosed)
			}
			if err == fdwait.ErrWoken {
				continue // kicked, or a new deadline
			}
			if err != nil && !c.readable() {
				return 0, c.opErr("read", waitErr(err))
			}
		}
	}
	n := c.copyOut(p)
	c.updateCredits()
	if n > 0 {
		return n, nil
	}
	if c.err != nil {
		return 0, c.opErr("read", c.err)
	}
	return 0, io.EOF
}

// readable is whether Read can return: data queued, or none to come.
func (c *Conn) readable() bool {
	return c.rmsgHead != c.rmsgTail || c.state&stReadable == 0 || c.closed
}

// readReadyFunc is Read's wait condition, run whenever the completion
// channel may have an event.
func (c *Conn) readReadyFunc() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.driveOwn(&c.readKicked, c.readable, c.writeParked || c.ctrlParked)
}

// driveOwn is drive for a parked call's own pass, with its side's kick
// mark set while it runs: a Wake from the pass would only end the call's
// next wait at once.
func (c *Conn) driveOwn(kicked *bool, cond func() bool, others bool) bool {
	was := *kicked
	*kicked = true
	done := c.drive(cond, others)
	*kicked = was
	return done
}

// drive takes the channel's events, processes completions and arms the CQ
// until cond holds (true) or the CQ is armed with nothing left to process
// (false: wait for the next event). While another call is parked (others),
// it leaves the CQ armed even when cond holds: the event it took may have
// been the one the parked call waits for.
func (c *Conn) drive(cond func() bool, others bool) bool {
	c.takeEvents()
	for {
		c.progress()
		done := cond()
		if c.armed || (done && !others) {
			return done
		}
		if err := c.r.cq.ReqNotify(false); err != nil {
			c.fail(err)
			return true
		}
		c.armed = true
	}
}

// takeEvents reads and acknowledges the completion channel's event, if
// any. The channel has one CQ, which is armed once per event, so there is
// at most one: a second read would only find the channel empty, and so
// would a read while the CQ is not armed (the read it saves, EAGAIN, came
// in 0.37 of 0.75 reads per 64-byte round trip of rstream -T b).
func (c *Conn) takeEvents() {
	if !c.armed {
		return
	}
	if got, err := c.r.ch.TryGetEvent(); err == nil {
		got.Ack(1)
		c.armed = false
	}
}

// copyOut moves queued data into p, as much as fits, freeing ring space
// and counting whole messages read.
func (c *Conn) copyOut(p []byte) int {
	n := 0
	ring := c.r.rbuf()
	for n < len(p) && c.rmsgHead != c.rmsgTail {
		size := int(c.rmsg[c.rmsgHead])
		if len(p)-n < size {
			size = len(p) - n
			c.rmsg[c.rmsgHead] -= uint32(size)
		} else {
			c.rseqNo++
			if c.rmsgHead++; c.rmsgHead == len(c.rmsg) {
				c.rmsgHead = 0
			}
		}
		for size > 0 {
			k := copy(p[n:n+size], ring[c.rbufOffset:])
			n += k
			size -= k
			c.rbufAvail += k
			if c.rbufOffset += k; c.rbufOffset == len(ring) {
				c.rbufOffset = 0
			}
		}
	}
	return n
}

// Write writes p to the peer. It waits for credits and send buffer as
// needed, until the write deadline (os.ErrDeadlineExceeded, with the bytes
// already written) or Close (net.ErrClosed). After the peer disconnected
// it fails with ECONNRESET, after CloseWrite with EPIPE.
func (c *Conn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, c.opErr("write", net.ErrClosed)
	}
	if passed(c.writeDeadline) {
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	}
	n, olen := 0, firstWrite
	for n < len(p) {
		if err := c.writeErr(); err != nil {
			return n, c.opErr("write", err)
		}
		if !c.canSend() {
			if err := c.waitWritable(); err != nil {
				return n, c.opErr("write", err)
			}
			continue
		}
		xfer := min(len(p)-n, olen, c.sbufAvail, int(c.target[c.targetSGE].Length))
		if olen < maxWrite {
			olen <<= 1
		}
		if err := c.postData(p[n : n+xfer]); err != nil {
			c.fail(err)
			return n, c.opErr("write", err)
		}
		n += xfer
	}
	return n, nil
}

// writeErr is why nothing more can be written, or nil.
func (c *Conn) writeErr() error {
	switch {
	case c.closed:
		return net.ErrClosed
	case c.err != nil:
		return c.err
	case c.state&stConnected == 0:
		return unix.ECONNRESET
	case c.state&stWritable == 0:
		return unix.EPIPE
	}
	return nil
}

// canSend is rsocket's condition for a data message: a send queue slot,
// the send buffer's low-water mark, a message credit and ring space at the
// peer.
func (c *Conn) canSend() bool {
	return c.sqeAvail > 0 && c.sbufAvail >= sendLowWater && c.sseqNo != c.sseqComp &&
		c.target[c.targetSGE].Length != 0
}

func (c *Conn) writeReadyFunc() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.driveOwn(&c.writeKicked, c.writable, c.readParked || c.ctrlParked)
}

// writable is whether Write can go on: a data message may be sent, or
// none ever will.
func (c *Conn) writable() bool { return c.canSend() || c.writeErr() != nil }

// postData writes b into the current ring half at the peer, with a data
// message. b is copied into the send ring (its completion frees the space)
// or, when it fits, sent inline.
func (c *Conn) postData(b []byte) error {
	t := &c.target[c.targetSGE]
	msg := message(opData, uint32(len(b)))
	wr := &c.swr[0]
	*wr = qp.SendWR{ID: uint64(msg), Opcode: qp.RDMAWriteWithImm, Flags: qp.Signaled, Imm: msg, RemoteAddr: t.Addr, RKey: t.Key}
	c.fillPayload(wr, b)
	err := c.r.q.PostSend(c.swr[:])
	wr.Inline, wr.SGEs = nil, nil
	if err != nil {
		return err
	}
	c.sseqNo++
	c.sqeAvail--
	c.sbufAvail -= len(b)
	t.Addr += uint64(len(b))
	t.Length -= uint32(len(b))
	if t.Length == 0 {
		c.targetSGE ^= 1
	}
	return nil
}

// fillPayload gives wr its payload b: inline when it fits, else copied
// into the send ring (one or two SGEs across the wrap), whose space the
// completion frees.
func (c *Conn) fillPayload(wr *qp.SendWR, b []byte) {
	if len(b) <= c.r.inline {
		wr.Flags |= qp.Inline
		wr.Inline = b
		return
	}
	ring := c.r.sbuf()
	k := copy(ring[c.sbufTail:], b)
	c.ssge[0] = uverbs.SGE{Addr: c.r.sbufAddr() + uint64(c.sbufTail), Length: uint32(k), LKey: c.r.smr.LKey()}
	wr.SGEs = c.ssge[:1]
	if k < len(b) {
		copy(ring, b[k:])
		c.ssge[1] = uverbs.SGE{Addr: c.r.sbufAddr(), Length: uint32(len(b) - k), LKey: c.r.smr.LKey()}
		wr.SGEs = c.ssge[:2]
	}
	c.sbufTail = (c.sbufTail + len(b)) % len(ring)
}

// progress is rsocket's CQ pass: grant credits, take completions, grant
// credits again.
func (c *Conn) progress() {
	c.updateCredits()
	c.pollCQ()
	c.updateCredits()
	c.kick()
}

// kick wakes a Read or Write parked in its wait whose condition now holds.
// The completion that made it hold may have come with the event another
// waiter took; the channel then shows nothing to the parked one. Its
// Poller's Wake wakes it.
func (c *Conn) kick() {
	if c.readParked && !c.readKicked && c.readable() {
		c.readKicked = true
		c.r.rw.Wake()
	}
	if c.writeParked && !c.writeKicked && c.writable() {
		c.writeKicked = true
		c.r.ww.Wake()
	}
}

// pollCQ processes every completion queued.
func (c *Conn) pollCQ() {
	for {
		n, err := c.r.cq.Poll(c.wc[:])
		if err != nil {
			c.fail(err)
			return
		}
		if n == 0 {
			return
		}
		received := 0
		for i := range c.wc[:n] {
			wc := &c.wc[i]
			if wc.WRID&recvID != 0 {
				if c.received(wc) {
					received++
				}
			} else {
				c.sent(wc)
			}
		}
		if received > 0 && c.state&stConnected != 0 {
			if err := c.r.q.PostRecv(c.rwr[:received]); err != nil {
				c.fail(err)
			}
		}
	}
}

// received handles a receive completion: one message from the peer. It
// reports whether the receive is to be posted again.
func (c *Conn) received(wc *cq.WC) bool {
	if wc.Status != cq.Success {
		// Flushed: the QP went to ERROR (the peer disconnected or Close).
		c.state &^= stConnected | stReadable | stWritable
		return false
	}
	if wc.Flags&cq.WithImm == 0 {
		c.fail(protoErr("message without immediate data"))
		return true
	}
	m := wc.Imm
	switch msgOp(m) {
	case opData:
		size := msgData(m)
		next := c.rmsgTail + 1
		if next == len(c.rmsg) {
			next = 0
		}
		switch {
		case size == 0 || int(size) > c.r.rbufLen:
			c.fail(protoErr("data message of a bad length"))
		case next == c.rmsgHead:
			c.fail(protoErr("data message beyond the credits granted"))
		default:
			c.rmsg[c.rmsgTail] = size
			c.rmsgTail = next
		}
	case opSGL:
		c.sseqComp = uint16(msgData(m))
		if wc.ByteLen == sgeLen {
			c.target[c.targetFill] = getSGE(c.r.targetList()[c.targetFill*sgeLen:], binary.LittleEndian)
			c.targetFill ^= 1
		}
	case opCtrl:
		switch msgData(m) {
		case ctrlDisconnect:
			c.state &^= stConnected | stReadable | stWritable
		case ctrlShutdown:
			if c.state&stWritable != 0 {
				c.state &^= stReadable
			} else {
				c.state &^= stConnected | stReadable | stWritable
			}
		}
	case opIOMapSGL:
		// The peer wrote entry i of this side's iomap table.
		if i := int(msgData(m)); i < len(c.iomaps) && wc.ByteLen == iomapLen {
			c.iomaps[i] = getIOMap(c.r.iomapTable()[i*iomapLen:], binary.LittleEndian)
		}
	}
	return true
}

// sent handles a send completion.
func (c *Conn) sent(wc *cq.WC) {
	m := uint32(wc.WRID)
	switch msgOp(m) {
	case opSGL, opCtrl:
		c.ctrlMax++
		if msgOp(m) == opCtrl && msgData(m) == ctrlDisconnect {
			c.state &^= stConnected | stReadable | stWritable
		}
	case opIOMapSGL:
		c.sqeAvail++
		c.sbufAvail += iomapLen
	default: // opData, opWrite: the payload's length
		c.sqeAvail++
		c.sbufAvail += int(msgData(m))
	}
	if wc.Status != cq.Success && c.state&stConnected != 0 {
		c.fail(&completionError{wc.Status})
	}
}

// updateCredits hands out a free ring half, or fresh message credits, when
// rsocket would: half the ring read again, or half the credit window used.
func (c *Conn) updateCredits() {
	half := c.r.rbufLen / 2
	if c.state&stConnected == 0 || c.ctrlSeq == c.ctrlMax {
		return
	}
	if c.rbufAvail < half && int16(c.rseqNo-c.rseqComp) < 0 {
		return
	}
	c.rseqComp = c.rseqNo + uint16(c.r.rq/2)
	msg := message(opSGL, uint32(c.rseqNo)+uint32(c.r.rq))
	wr := &c.swr[0]
	*wr = qp.SendWR{ID: uint64(msg), Opcode: qp.RDMAWriteWithImm, Flags: qp.Signaled, Imm: msg}
	if c.rbufAvail >= half {
		slot := int(c.ctrlSeq%ctrlSlots) * sgeLen
		putSGE(c.r.ctrl()[slot:], sge{Addr: c.r.rbufAddr() + uint64(c.rbufFree), Key: c.r.rmr.RKey(), Length: uint32(half)}, c.peerOrder)
		c.ssge[0] = uverbs.SGE{Addr: c.r.ctrlAddr() + uint64(slot), Length: sgeLen, LKey: c.r.smr.LKey()}
		wr.SGEs = c.ssge[:1]
		wr.RemoteAddr = c.remoteSGL.Addr + uint64(c.remoteSGE*sgeLen)
		wr.RKey = c.remoteSGL.Key
	}
	err := c.r.q.PostSend(c.swr[:])
	wr.SGEs = nil
	if err != nil {
		c.fail(err)
		return
	}
	c.ctrlSeq++
	if c.rbufAvail >= half {
		c.rbufAvail -= half
		if c.rbufFree += half; c.rbufFree >= c.r.rbufLen {
			c.rbufFree = 0
		}
		c.remoteSGE ^= 1
	}
}

// fail records the connection's first failure; nothing more is sent.
func (c *Conn) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	c.state &^= stConnected | stReadable | stWritable
}

// allSendsDone is whether every message posted has completed.
func (c *Conn) allSendsDone() bool {
	return c.state&stConnected == 0 ||
		(c.sqeAvail == c.r.sq-ctrlSlots && c.ctrlSeq == c.ctrlMax-ctrlSlots)
}

func (c *Conn) sendsDoneFunc() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drive(c.allSendsDone, c.readParked || c.writeParked)
}

// CloseWrite shuts down the sending side: the peer reads io.EOF once it
// has read everything written before. Reading goes on.
func (c *Conn) CloseWrite() error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("close", net.ErrClosed)
	}
	if c.state&stWritable == 0 {
		return nil
	}
	// The side stays writable until its message is posted: a peer's
	// shutdown that comes while this waits for a slot must not read as
	// the answer to one this side has not sent.
	if err := c.waitCtrlSlot(c.r.ww, &c.writeDeadline); err != nil {
		return c.opErr("close", err)
	}
	ctrl := uint32(ctrlShutdown)
	if c.state&stReadable == 0 {
		ctrl = ctrlDisconnect
	}
	c.state &^= stWritable
	if err := c.postCtrl(ctrl); err != nil {
		return c.opErr("close", err)
	}
	return nil
}

// waitCtrlSlot waits with w for a free control slot, until *deadline
// (read under c.mu) or the connection is down.
func (c *Conn) waitCtrlSlot(w *fdwait.Poller, deadline *time.Time) error {
	ctrlFree := func() bool { return c.ctrlSeq != c.ctrlMax || c.state&stConnected == 0 }
	if c.progress(); ctrlFree() {
		return nil
	}
	c.ctrlParked = true
	err := c.waitCompletionsUnwoken(w, deadline, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.drive(ctrlFree, c.readParked || c.writeParked)
	})
	c.ctrlParked = false
	if err != nil && !ctrlFree() {
		return waitErr(err)
	}
	return nil
}

// postCtrl sends a control message (shutdown, disconnect) in the free
// slot waitCtrlSlot found, unless the connection went down meanwhile.
func (c *Conn) postCtrl(ctrl uint32) error {
	if c.state&stConnected == 0 {
		return nil
	}
	msg := message(opCtrl, ctrl)
	c.swr[0] = qp.SendWR{ID: uint64(msg), Opcode: qp.RDMAWriteWithImm, Flags: qp.Signaled, Imm: msg}
	if err := c.r.q.PostSend(c.swr[:]); err != nil {
		c.fail(err)
		return err
	}
	c.ctrlSeq++
	return nil
}

// Close closes the connection: blocked Reads and Writes return
// net.ErrClosed; the peer is told (a disconnect message after the data
// written, as rclose does) and, after at most a few seconds for the last
// messages to be acknowledged, the queue pair and its resources go.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.r.rw.Wake()
	c.r.ww.Wake()
	if c.alive != nil {
		c.alive.Stop()
	}
	c.mu.Unlock()
	// Blocked calls have been woken; wait for them to leave.
	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()

	c.mu.Lock()
	linger := time.Now().Add(lingerTime)
	var errs []error
	if c.state&stConnected != 0 {
		// As in CloseWrite, the state changes once the message is posted.
		err := c.waitCtrlSlot(c.r.rw, &linger)
		if err == nil {
			err = c.postCtrl(ctrlDisconnect)
		}
		if err != nil {
			errs = append(errs, err)
		}
		c.state &^= stReadable | stWritable
		if !c.allSendsDone() {
			c.ctrlParked = true
			c.waitCompletionsUnwoken(c.r.rw, &linger, c.sendsDone)
			c.ctrlParked = false
		}
	}
	c.state = 0
	c.mu.Unlock()
	c.cmStop()
	<-c.cmDone
	if err := c.r.rc.Disconnect(); err != nil && !errors.Is(err, rdmacm.ErrClosed) {
		errs = append(errs, err)
	}
	errs = append(errs, c.r.release())
	if err := errors.Join(errs...); err != nil {
		return c.opErr("close", err)
	}
	return nil
}

// LocalAddr is this side's address, a *net.TCPAddr.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr is the peer's address, a *net.TCPAddr.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets both the read and the write deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets when a Read, waiting or to come, gives up with
// os.ErrDeadlineExceeded; zero means never.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("set deadline", net.ErrClosed)
	}
	c.readDeadline = t
	if c.readParked {
		c.r.rw.Wake() // to wait again with t
	}
	return nil
}

// SetWriteDeadline sets when a Write, waiting or to come, gives up with
// os.ErrDeadlineExceeded; zero means never.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("set deadline", net.ErrClosed)
	}
	c.writeDeadline = t
	if c.writeParked || c.ctrlParked {
		c.r.ww.Wake() // to wait again with t
	}
	return nil
}

// watchCM waits for the connection's CM events: a peer that disconnected
// without a disconnect message (it died, its host went away) shows up
// there. The event moves the QP to ERROR, whose flushed receives wake a
// waiting Read or Write.
func (c *Conn) watchCM(ctx context.Context) {
	defer close(c.cmDone)
	for {
		ev, err := c.r.rc.WaitEvent(ctx)
		if err != nil {
			return
		}
		switch ev.Type {
		case rdmacm.EventDisconnected, rdmacm.EventDeviceRemoval, rdmacm.EventUnreachable:
			c.mu.Lock()
			c.state &^= stConnected | stWritable
			c.mu.Unlock()
			return
		}
	}
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "rsocket", Source: c.local, Addr: c.remote, Err: err}
}

func passed(deadline time.Time) bool {
	return !deadline.IsZero() && !time.Now().Before(deadline)
}

// waitErr maps a waiter's error: a deadline is os.ErrDeadlineExceeded.
func waitErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return err
}

// completionError is a send that completed with an error: the connection
// is broken. It matches EIO, as rsocket reports it.
type completionError struct{ status cq.Status }

func (e *completionError) Error() string {
	return "rsocket: send completed with " + e.status.String()
}

func (e *completionError) Unwrap() error { return unix.EIO }

// protoErr is a peer that broke the protocol (EPROTO).
func protoErr(what string) error { return &protocolError{what} }

type protocolError struct{ what string }

func (e *protocolError) Error() string { return "rsocket: peer sent " + e.what }
func (e *protocolError) Unwrap() error { return unix.EPROTO }
