package rxe

import (
	"encoding/binary"
	"errors"
	"unsafe"
)

// The encoders write straight into a ring slot: no intermediate value, no
// allocation. They fill what librxe's init_send_wqe and rxe_post_one_recv
// fill; unlike librxe they also clear the fixed part of the WQE first, so no
// state the kernel left in a reused slot (status, PSNs, has_rd_atomic) leaks
// into the new request. The kernel derives wqe->mask from the opcode itself
// (req_next_wqe).

// encodeSend writes wr into the send slot p. length is the payload size
// (the SGE total or len(wr.Inline)) and ssn the send sequence number. The
// caller has checked wr against the slot's room.
func encodeSend(p unsafe.Pointer, wr *SendWR, length, ssn uint32) {
	w := (*sendWQE)(p)
	*w = sendWQE{}
	w.wr.wrID = wr.ID
	w.wr.opcode = uint32(wr.Opcode)
	w.wr.sendFlags = uint32(wr.Flags)
	if wr.Opcode.hasImm() {
		binary.BigEndian.PutUint32(w.wr.ex[:], wr.Imm)
	}
	if wr.Opcode.isRDMA() {
		r := w.wr.rdma()
		r.remoteAddr = wr.RemoteAddr
		r.rkey = wr.RKey
		w.iova = wr.RemoteAddr
	}
	w.ssn = ssn
	w.dma.length = length
	w.dma.resid = length
	payload := unsafe.Add(p, sendWQESize)
	if wr.Flags&Inline != 0 {
		copy(unsafe.Slice((*byte)(payload), len(wr.Inline)), wr.Inline)
		return
	}
	w.dma.numSGE = uint32(len(wr.SGEs))
	copy(unsafe.Slice((*SGE)(payload), len(wr.SGEs)), wr.SGEs)
}

// encodeRecv writes wr into the receive slot p; length is the SGE total.
func encodeRecv(p unsafe.Pointer, wr *RecvWR, length uint32) {
	w := (*recvWQE)(p)
	*w = recvWQE{}
	w.wrID = wr.ID
	w.dma.length = length
	w.dma.resid = length
	w.dma.numSGE = uint32(len(wr.SGEs))
	copy(unsafe.Slice((*SGE)(unsafe.Add(p, recvWQESize)), len(wr.SGEs)), wr.SGEs)
}

// errBadWQE reports a slot whose WQE claims more SGEs or inline bytes than
// the slot holds.
var errBadWQE = errors.New("rxe: WQE overruns its slot")

// SendWQE is a send WQE as the kernel's requester reads it. It is for
// simulated kernels, tools and tests; applications post [SendWR]s.
type SendWQE struct {
	// WR holds the request. Its SGEs and Inline alias the slot.
	WR SendWR
	// SSN is the send sequence number the provider assigned.
	SSN uint32
	// Length and Resid are dma.length and dma.resid (equal when posted).
	Length, Resid uint32
	// IOVA is the remote address the requester starts at.
	IOVA uint64
}

// DecodeSendWQE reads the send WQE in slot (a [Ring.Slot] of a send queue).
// It does not allocate: the returned SGEs and inline bytes alias the slot.
func DecodeSendWQE(slot []byte) (SendWQE, error) {
	if len(slot) < sendWQESize {
		return SendWQE{}, errBadWQE
	}
	p := unsafe.Pointer(&slot[0])
	w := (*sendWQE)(p)
	d := SendWQE{
		WR: SendWR{
			ID:     w.wr.wrID,
			Opcode: Opcode(w.wr.opcode),
			Flags:  SendFlags(w.wr.sendFlags),
		},
		SSN:    w.ssn,
		Length: w.dma.length,
		Resid:  w.dma.resid,
		IOVA:   w.iova,
	}
	if d.WR.Opcode.hasImm() {
		d.WR.Imm = binary.BigEndian.Uint32(w.wr.ex[:])
	}
	if d.WR.Opcode.isRDMA() {
		r := w.wr.rdma()
		d.WR.RemoteAddr, d.WR.RKey = r.remoteAddr, r.rkey
	}
	room := len(slot) - sendWQESize
	if d.WR.Flags&Inline != 0 {
		if int(w.dma.length) > room {
			return SendWQE{}, errBadWQE
		}
		d.WR.Inline = slot[sendWQESize : sendWQESize+int(w.dma.length)]
		return d, nil
	}
	if int(w.dma.numSGE) > room/sgeSize {
		return SendWQE{}, errBadWQE
	}
	d.WR.SGEs = unsafe.Slice((*SGE)(unsafe.Add(p, sendWQESize)), w.dma.numSGE)
	return d, nil
}

// RecvWQE is a receive WQE as the kernel's responder reads it. It is for
// simulated kernels, tools and tests.
type RecvWQE struct {
	// WR holds the request; its SGEs alias the slot.
	WR RecvWR
	// Length and Resid are dma.length and dma.resid (equal when posted).
	Length, Resid uint32
}

// DecodeRecvWQE reads the receive WQE in slot (a [Ring.Slot] of a receive
// queue). It does not allocate: the returned SGEs alias the slot.
func DecodeRecvWQE(slot []byte) (RecvWQE, error) {
	if len(slot) < recvWQESize {
		return RecvWQE{}, errBadWQE
	}
	p := unsafe.Pointer(&slot[0])
	w := (*recvWQE)(p)
	if int(w.dma.numSGE) > (len(slot)-recvWQESize)/sgeSize {
		return RecvWQE{}, errBadWQE
	}
	return RecvWQE{
		WR: RecvWR{
			ID:   w.wrID,
			SGEs: unsafe.Slice((*SGE)(unsafe.Add(p, recvWQESize)), w.dma.numSGE),
		},
		Length: w.dma.length,
		Resid:  w.dma.resid,
	}, nil
}
