package rxe

// The kernel's side of the rings, for this package's tests: reading the WQEs
// the provider wrote, as rxe's requester and responder do, and writing
// completions, as its completer does.

import (
	"encoding/binary"
	"errors"
	"unsafe"
)

// errBadWQE reports a slot whose WQE claims more SGEs or inline bytes than
// the slot holds.
var errBadWQE = errors.New("rxe: WQE overruns its slot")

// sendWQEView is a send WQE as the kernel's requester reads it. It is for
// simulated kernels, tools and tests; applications post [SendWR]s.
type sendWQEView struct {
	// WR holds the request. Its SGEs and Inline alias the slot.
	WR SendWR
	// SSN is the send sequence number the provider assigned.
	SSN uint32
	// Length and Resid are dma.length and dma.resid (equal when posted).
	Length, Resid uint32
	// IOVA is the remote address the requester starts at.
	IOVA uint64
}

// decodeSendWQE reads the send WQE in slot (a [Ring.Slot] of a send queue).
// It does not allocate: the returned SGEs and inline bytes alias the slot.
func decodeSendWQE(slot []byte) (sendWQEView, error) {
	if len(slot) < sendWQESize {
		return sendWQEView{}, errBadWQE
	}
	p := unsafe.Pointer(&slot[0])
	w := (*sendWQE)(p)
	d := sendWQEView{
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
			return sendWQEView{}, errBadWQE
		}
		d.WR.Inline = slot[sendWQESize : sendWQESize+int(w.dma.length)]
		return d, nil
	}
	if int(w.dma.numSGE) > room/sgeSize {
		return sendWQEView{}, errBadWQE
	}
	d.WR.SGEs = unsafe.Slice((*SGE)(unsafe.Add(p, sendWQESize)), w.dma.numSGE)
	return d, nil
}

// recvWQEView is a receive WQE as the kernel's responder reads it. It is for
// simulated kernels, tools and tests.
type recvWQEView struct {
	// WR holds the request; its SGEs alias the slot.
	WR RecvWR
	// Length and Resid are dma.length and dma.resid (equal when posted).
	Length, Resid uint32
}

// decodeRecvWQE reads the receive WQE in slot (a [Ring.Slot] of a receive
// queue). It does not allocate: the returned SGEs alias the slot.
func decodeRecvWQE(slot []byte) (recvWQEView, error) {
	if len(slot) < recvWQESize {
		return recvWQEView{}, errBadWQE
	}
	p := unsafe.Pointer(&slot[0])
	w := (*recvWQE)(p)
	if int(w.dma.numSGE) > (len(slot)-recvWQESize)/sgeSize {
		return recvWQEView{}, errBadWQE
	}
	return recvWQEView{
		WR: RecvWR{
			ID:   w.wrID,
			SGEs: unsafe.Slice((*SGE)(unsafe.Add(p, recvWQESize)), w.dma.numSGE),
		},
		Length: w.dma.length,
		Resid:  w.dma.resid,
	}, nil
}

// encodeWC writes w into slot (a [Ring.Slot] of a CQ) the way rdma_rxe's
// completer and responder do. It plays the kernel's part for simulated
// kernels and tests. It panics if the slot is smaller than struct
// ib_uverbs_wc.
func encodeWC(slot []byte, w *WC) {
	u := (*uverbsWC)(unsafe.Pointer(&slot[:wcSize][0]))
	*u = uverbsWC{
		wrID:         w.WRID,
		status:       uint32(w.Status),
		opcode:       uint32(w.Opcode),
		vendorErr:    w.VendorErr,
		byteLen:      w.ByteLen,
		qpNum:        w.QPNum,
		srcQP:        w.SrcQP,
		wcFlags:      uint32(w.Flags),
		pkeyIndex:    w.PKeyIndex,
		slid:         w.SLID,
		sl:           w.SL,
		dlidPathBits: w.DLIDPathBits,
		portNum:      w.PortNum,
	}
	if w.Flags&WCWithInvalidate != 0 {
		binary.NativeEndian.PutUint32(u.ex[:], w.Imm)
	} else {
		binary.BigEndian.PutUint32(u.ex[:], w.Imm)
	}
}
