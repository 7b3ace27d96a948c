package rsocket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

// rsocket's iomap extension (riomap, riowrite): a side registers a buffer
// for the peer's RDMA WRITEs and tells the peer where it is with an
// IOMAP_SGL message, which writes a 24-byte entry {offset, addr, key,
// length} into the peer's iomap table (after its target list, as many
// entries as its connect data announced). The peer then writes into the
// buffer directly at an offset of the mapping, with plain RDMA WRITEs: no
// receive, no completion, no message at the owner, who watches the buffer
// itself.

const (
	// opWrite tags the local completion of an IOWrite; it is never sent.
	opWrite = 2
	// iomapLen is the size of struct rs_iomap.
	iomapLen = 8 + sgeLen
	// MaxIOMapSize is the largest Options.IOMapSize.
	MaxIOMapSize = 128
)

// ErrNoMapping is returned (wrapped, with EINVAL) by IOWrite when the peer
// has mapped nothing at the offset.
var ErrNoMapping = errors.New("rsocket: no peer mapping at the offset")

// iomapMR is one of IOMap's registrations and the entry of the peer's
// iomap table it was sent to.
type iomapMR struct {
	mr    *uverbs.MR
	index int
}

// iomapEntry is struct rs_iomap.
type iomapEntry struct {
	Offset uint64
	SGE    sge
}

func putIOMap(b []byte, e iomapEntry, o binary.ByteOrder) {
	o.PutUint64(b, e.Offset)
	putSGE(b[8:], e.SGE, o)
}

func getIOMap(b []byte, o binary.ByteOrder) iomapEntry {
	return iomapEntry{Offset: o.Uint64(b), SGE: getSGE(b[8:], o)}
}

// scaleIOMapSize and iomapSizeOf are rsocket's 8-bit encoding of a table
// size in the connect data.
func scaleIOMapSize(n int) uint8 {
	if n <= 128 {
		return uint8(n)
	}
	return uint8(0x80 | n>>8)
}

func iomapSizeOf(scale uint8) int {
	if scale <= 128 {
		return int(scale)
	}
	return int(scale&0x7f) << 8
}

// IOMap registers b for the peer's IOWrites (riomap with PROT_WRITE): the
// peer's IOWrite at offset o lands at b's byte o - offset. offset -1 means
// b's address, as in riomap. The mapping's descriptor goes to the peer at
// once, in order with the data written before it; it needs a free entry in
// the peer's iomap table (the peer's Options.IOMapSize, riostream's 1).
// The memory stays registered until IOUnmap or Close.
func (c *Conn) IOMap(b *uverbs.Buffer, offset int64) (int64, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writeErr(); err != nil {
		return 0, c.opErr("iomap", err)
	}
	index := -1
	for i, used := range c.peerIOMapUsed {
		if !used {
			index = i
			break
		}
	}
	if index < 0 {
		return 0, c.opErr("iomap", fmt.Errorf("rsocket: the peer's iomap table (%d entries) is full: %w", len(c.peerIOMapUsed), unix.ENOMEM))
	}
	mr, err := c.r.pd.RegisterMR(b, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		return 0, c.opErr("iomap", err)
	}
	c.r.iomrs = append(c.r.iomrs, iomapMR{mr, index})
	if offset == -1 {
		offset = int64(mr.Addr())
	}
	c.peerIOMapUsed[index] = true
	for !c.canSend() {
		if err := c.waitWritable(); err != nil {
			return 0, c.opErr("iomap", err)
		}
	}
	e := iomapEntry{Offset: uint64(offset), SGE: sge{Addr: mr.Addr(), Key: mr.RKey(), Length: uint32(min(mr.Len(), 1<<32-1))}}
	slot := c.r.sbuf()[c.sbufTail:]
	var tmp [iomapLen]byte
	putIOMap(tmp[:], e, c.peerOrder)
	msg := message(opIOMapSGL, uint32(index))
	wr := &c.swr[0]
	*wr = qp.SendWR{ID: uint64(msg), Opcode: qp.RDMAWriteWithImm, Flags: qp.Signaled, Imm: msg,
		RemoteAddr: c.peerIOMap.Addr + uint64(index*iomapLen), RKey: c.peerIOMap.Key}
	if c.r.inline >= iomapLen {
		wr.Flags |= qp.Inline
		wr.Inline = tmp[:]
	} else {
		k := copy(slot, tmp[:])
		c.ssge[0] = uverbs.SGE{Addr: c.r.sbufAddr() + uint64(c.sbufTail), Length: uint32(k), LKey: c.r.smr.LKey()}
		wr.SGEs = c.ssge[:1]
		if k < iomapLen {
			copy(c.r.sbuf(), tmp[k:])
			c.ssge[1] = uverbs.SGE{Addr: c.r.sbufAddr(), Length: uint32(iomapLen - k), LKey: c.r.smr.LKey()}
			wr.SGEs = c.ssge[:2]
		}
		c.sbufTail = (c.sbufTail + iomapLen) % c.r.sbufLen
	}
	err = c.r.q.PostSend(c.swr[:])
	wr.Inline, wr.SGEs = nil, nil
	if err != nil {
		c.fail(err)
		return 0, c.opErr("iomap", err)
	}
	c.sseqNo++
	c.sqeAvail--
	c.sbufAvail -= iomapLen
	return offset, nil
}

// IOUnmap ends IOMap's mapping of b (riounmap): b is no longer registered
// and its entry in the peer's iomap table is free for the next IOMap, which
// overwrites it there. Nothing is sent, as rsocket sends nothing
// (riounmap, librdmacm/rsocket.c:4182-4213, only deregisters): the peer
// keeps the entry and an IOWrite of its into b after this fails its
// connection with a remote access error, so the two sides agree on when
// first (riostream unmaps after each test's last exchange). b itself stays
// the caller's. A b IOMap did not map is EINVAL.
func (c *Conn) IOUnmap(b *uverbs.Buffer) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("iounmap", net.ErrClosed)
	}
	for i, m := range c.r.iomrs {
		if m.mr.Buffer() != b {
			continue
		}
		c.r.iomrs = append(c.r.iomrs[:i], c.r.iomrs[i+1:]...)
		c.peerIOMapUsed[m.index] = false
		if err := m.mr.Close(); err != nil {
			return c.opErr("iounmap", err)
		}
		return nil
	}
	return c.opErr("iounmap", fmt.Errorf("rsocket: buffer not mapped by IOMap: %w", unix.EINVAL))
}

// IOWrite writes p into the peer's mapped memory at offset (riowrite): by
// plain RDMA WRITEs, which the peer's application does not see arrive; it
// learns of them from the data itself. It writes across mappings in order
// and returns the bytes written; an offset the peer mapped nothing at ends
// it with ErrNoMapping.
func (c *Conn) IOWrite(p []byte, offset int64) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	n, olen := 0, firstWrite
	var e *iomapEntry
	for n < len(p) {
		off := uint64(offset) + uint64(n)
		if e == nil || off >= e.Offset+uint64(e.SGE.Length) {
			if e = c.findIOMap(off); e == nil {
				return n, c.opErr("iowrite", fmt.Errorf("%w at %d: %w", ErrNoMapping, off, unix.EINVAL))
			}
		}
		if err := c.writeErr(); err != nil {
			return n, c.opErr("iowrite", err)
		}
		if !c.canSend() {
			if err := c.waitWritable(); err != nil {
				return n, c.opErr("iowrite", err)
			}
			continue
		}
		xfer := min(len(p)-n, olen, c.sbufAvail, int(e.Offset+uint64(e.SGE.Length)-off))
		if olen < maxWrite {
			olen <<= 1
		}
		if err := c.postWrite(p[n:n+xfer], e.SGE.Addr+off-e.Offset, e.SGE.Key); err != nil {
			c.fail(err)
			return n, c.opErr("iowrite", err)
		}
		n += xfer
	}
	return n, nil
}

// findIOMap returns the peer's mapping holding offset off, or nil.
func (c *Conn) findIOMap(off uint64) *iomapEntry {
	for i := range c.iomaps {
		e := &c.iomaps[i]
		if e.SGE.Length != 0 && off >= e.Offset && off < e.Offset+uint64(e.SGE.Length) {
			return e
		}
	}
	return nil
}

// postWrite is rsocket's direct write: b to the peer's addr, through the
// send ring (or inline), without an immediate.
func (c *Conn) postWrite(b []byte, addr uint64, rkey uint32) error {
	wr := &c.swr[0]
	*wr = qp.SendWR{ID: uint64(message(opWrite, uint32(len(b)))), Opcode: qp.RDMAWrite, Flags: qp.Signaled, RemoteAddr: addr, RKey: rkey}
	c.fillPayload(wr, b)
	err := c.r.q.PostSend(c.swr[:])
	wr.Inline, wr.SGEs = nil, nil
	if err != nil {
		return err
	}
	c.sqeAvail--
	c.sbufAvail -= len(b)
	return nil
}

// waitWritable parks until a data message may be sent (or never will);
// called and returning with c.mu held.
func (c *Conn) waitWritable() error {
	c.progress()
	if c.poll(c.writable, &c.writeDeadline); c.writable() {
		return nil
	}
	if passed(c.writeDeadline) {
		return os.ErrDeadlineExceeded // as in Read: no arming for a wait that ends at once
	}
	c.writeParked = true
	deadline := c.writeDeadline
	c.mu.Unlock()
	err := c.r.waitCompletions(c.r.ww, deadline, c.writeReady)
	c.mu.Lock()
	c.writeParked, c.writeKicked = false, false
	if c.closed {
		return net.ErrClosed
	}
	if err == fdwait.ErrWoken {
		return nil // kicked, or a new deadline: the caller looks again
	}
	if err != nil && !c.writable() {
		return waitErr(err)
	}
	return nil
}
