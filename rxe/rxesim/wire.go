package rxesim

import (
	"encoding/binary"
	"unsafe"

	"github.com/pureverbs/pureverbs/rxe"
)

// The kernel's reading of the rings, done here from the byte offsets of
// rdma/rdma_user_rxe.h and rdma/ib_user_verbs.h rather than through package
// rxe's encoders, so that the simulator checks them instead of echoing
// them. wire_test.go pins the offsets.
const (
	sendWRID       = 0
	sendOpcode     = 12
	sendFlags      = 16
	sendImm        = 20 // wr.ex.imm_data, big-endian
	sendRemoteAddr = 24 // wr.wr.rdma.remote_addr
	sendRKey       = 32 // wr.wr.rdma.rkey
	sendDMALength  = 184
	sendDMANumSGE  = 196
	sendWQEHeader  = 208 // sizeof(struct rxe_send_wqe): the SGEs or inline data follow

	recvWRID      = 0
	recvDMALength = 16
	recvDMANumSGE = 28
	recvWQEHeader = 40 // sizeof(struct rxe_recv_wqe)

	sgeSize = 16 // sizeof(struct rxe_sge)

	wcSize = 48 // sizeof(struct ib_uverbs_wc)

	wcWRID      = 0
	wcStatus    = 8
	wcOpcode    = 12
	wcVendorErr = 16
	wcByteLen   = 20
	wcEx        = 24 // ex.imm_data or ex.invalidate_rkey
	wcQPNum     = 28
	wcSrcQP     = 32
	wcFlags     = 36
	wcPKeyIndex = 40
	wcSLID      = 42
	wcSL        = 44
	wcPathBits  = 45
	wcPortNum   = 46
)

// sendWQE is what the requester reads from a send WQE. sges and inline
// alias the slot.
type sendWQE struct {
	id         uint64
	opcode     rxe.Opcode
	flags      rxe.SendFlags
	imm        uint32
	remoteAddr uint64
	rkey       uint32
	length     uint32
	sges       []rxe.SGE
	inline     []byte
}

// readSend decodes the send WQE in slot; ok is false when the WQE claims
// more SGEs or inline bytes than the slot holds.
func readSend(slot []byte) (w sendWQE, ok bool) {
	ne := binary.NativeEndian
	w = sendWQE{
		id:         ne.Uint64(slot[sendWRID:]),
		opcode:     rxe.Opcode(ne.Uint32(slot[sendOpcode:])),
		flags:      rxe.SendFlags(ne.Uint32(slot[sendFlags:])),
		imm:        binary.BigEndian.Uint32(slot[sendImm:]),
		remoteAddr: ne.Uint64(slot[sendRemoteAddr:]),
		rkey:       ne.Uint32(slot[sendRKey:]),
		length:     ne.Uint32(slot[sendDMALength:]),
	}
	room := slot[sendWQEHeader:]
	if w.flags&rxe.Inline != 0 {
		if int(w.length) > len(room) {
			return w, false
		}
		w.inline = room[:w.length]
		return w, true
	}
	w.sges, ok = sgeList(room, ne.Uint32(slot[sendDMANumSGE:]))
	return w, ok
}

// recvWQE is what the responder reads from a receive WQE; sges alias the
// slot.
type recvWQE struct {
	id     uint64
	length uint32
	sges   []rxe.SGE
}

// readRecv decodes the receive WQE in slot; ok is false when it claims more
// SGEs than the slot holds.
func readRecv(slot []byte) (w recvWQE, ok bool) {
	ne := binary.NativeEndian
	w = recvWQE{id: ne.Uint64(slot[recvWRID:]), length: ne.Uint32(slot[recvDMALength:])}
	w.sges, ok = sgeList(slot[recvWQEHeader:], ne.Uint32(slot[recvDMANumSGE:]))
	return w, ok
}

// sgeList views the first n struct rxe_sge of room without copying.
func sgeList(room []byte, n uint32) ([]rxe.SGE, bool) {
	if uint64(n) > uint64(len(room)/sgeSize) {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	return unsafe.Slice((*rxe.SGE)(unsafe.Pointer(&room[0])), n), true
}

// writeWC writes w into a CQ slot as struct ib_uverbs_wc, the way rxe's
// completer and responder fill it: the immediate in network byte order, an
// invalidated rkey in host order.
func writeWC(slot []byte, w *rxe.WC) {
	ne := binary.NativeEndian
	s := slot[:wcSize]
	clear(s)
	ne.PutUint64(s[wcWRID:], w.WRID)
	ne.PutUint32(s[wcStatus:], uint32(w.Status))
	ne.PutUint32(s[wcOpcode:], uint32(w.Opcode))
	ne.PutUint32(s[wcVendorErr:], w.VendorErr)
	ne.PutUint32(s[wcByteLen:], w.ByteLen)
	if w.Flags&rxe.WCWithInvalidate != 0 {
		ne.PutUint32(s[wcEx:], w.Imm)
	} else {
		binary.BigEndian.PutUint32(s[wcEx:], w.Imm)
	}
	ne.PutUint32(s[wcQPNum:], w.QPNum)
	ne.PutUint32(s[wcSrcQP:], w.SrcQP)
	ne.PutUint32(s[wcFlags:], uint32(w.Flags))
	ne.PutUint16(s[wcPKeyIndex:], w.PKeyIndex)
	ne.PutUint16(s[wcSLID:], w.SLID)
	s[wcSL], s[wcPathBits], s[wcPortNum] = w.SL, w.DLIDPathBits, w.PortNum
}
