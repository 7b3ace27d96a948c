package rxe

import (
	"encoding/binary"
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
	w.ssn = ssn
	w.dma.length = length
	w.dma.resid = length
	payload := unsafe.Add(p, sendWQESize)
	switch wr.Opcode {
	case OpRDMAWrite, OpRDMAWriteWithImm, OpRDMARead:
		r := w.wr.rdma()
		r.remoteAddr = wr.RemoteAddr
		r.rkey = wr.RKey
		w.iova = wr.RemoteAddr
	case OpSendWithInv, OpLocalInv:
		binary.NativeEndian.PutUint32(w.wr.ex[:], wr.InvRKey)
	case OpAtomicCmpAndSwp, OpAtomicFetchAndAdd:
		a := w.wr.atomic()
		a.remoteAddr = wr.RemoteAddr
		a.compareAdd = wr.CompareAdd
		if wr.Opcode == OpAtomicCmpAndSwp {
			a.swap = wr.Swap
		}
		a.rkey = wr.RKey
		w.iova = wr.RemoteAddr
	case OpAtomicWrite:
		r := w.wr.rdma()
		r.remoteAddr = wr.RemoteAddr
		r.rkey = wr.RKey
		w.iova = wr.RemoteAddr
		*(*uint64)(payload) = wr.Swap // dma.atomic_wr: the bytes stored remotely
		return
	case OpFlush:
		f := w.wr.flush()
		f.remoteAddr = wr.RemoteAddr
		f.length = wr.Flush.Length
		f.rkey = wr.RKey
		f.typ = uint8(wr.Flush.Type)
		f.level = uint8(wr.Flush.Level)
		w.iova = wr.RemoteAddr
		return
	case OpBindMW:
		m := w.wr.mw()
		m.addr = wr.Bind.Addr
		m.length = wr.Bind.Length
		m.mrLKey = wr.Bind.MRLKey
		m.mwRKey = wr.Bind.MWRKey
		m.rkey = wr.Bind.NewRKey
		m.access = uint32(wr.Bind.Access)
		return
	}
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
