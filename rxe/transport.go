package rxe

import (
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Errors of PostSend that depend on the QP's transport. Nothing of a
// failing call is posted.
var (
	// ErrOpcodeTransport: the opcode does not exist on the QP's transport
	// (UD has SEND and SEND_WITH_IMM only; UC has SEND, SEND_WITH_IMM,
	// RDMA_WRITE, RDMA_WRITE_WITH_IMM and BIND_MW), or a UD request lacks
	// its AH, or a connected QP's request has one (EINVAL).
	ErrOpcodeTransport error = &postError{"rxe: opcode or addressing not supported by the QP's transport", unix.EINVAL, nil}
	// ErrMessageTooLong: a UD payload longer than the port's MTU (EMSGSIZE).
	// rdma_rxe would complete such a send as successful and send nothing.
	ErrMessageTooLong error = &postError{"rxe: UD message longer than the path MTU", unix.EMSGSIZE, nil}
)

// checkTransport refuses what the QP's transport does not carry. A QP of
// the simulator (type 0) follows RC's rules.
func (q *sendQueue) checkTransport(wr *SendWR) error {
	switch q.typ {
	case uverbs.QPTypeUD:
		if wr.Opcode != OpSend && wr.Opcode != OpSendWithImm || wr.AH == nil {
			return ErrOpcodeTransport
		}
		if wr.AH.closed() {
			return errAHClosed
		}
	case uverbs.QPTypeUC:
		switch wr.Opcode {
		case OpSend, OpSendWithImm, OpRDMAWrite, OpRDMAWriteWithImm, OpBindMW:
		default:
			return ErrOpcodeTransport
		}
		fallthrough
	default:
		if wr.AH != nil {
			return ErrOpcodeTransport
		}
	}
	return nil
}

// checkLength refuses a UD payload of length bytes that exceeds the MTU.
func (q *sendQueue) checkLength(length uint32) error {
	if q.typ == uverbs.QPTypeUD && length > q.maxUD {
		return ErrMessageTooLong
	}
	return nil
}

// encodeUD writes the ud member of the WQE's wr union in slot p, which
// encodeSend has filled and cleared: the destination QPN and Q_Key and the
// AH number. With a non-zero AH number the kernel looks the address vector
// up itself, so the av stays zero.
func encodeUD(p unsafe.Pointer, wr *SendWR) {
	w := (*sendWQE)(p)
	w.wr.wr.remoteQPN = wr.RemoteQPN
	w.wr.wr.remoteQKey = wr.RemoteQKey
	w.wr.wr.ahNum = wr.AH.num
}

// udMaxMessage is the largest UD payload the QP's port carries: its active
// MTU (rxe has one port), which is what rdma_rxe checks a UD send against.
func udMaxMessage(c *uverbs.Context) (uint32, error) {
	p, err := c.QueryPort(1)
	if err != nil {
		return 0, err
	}
	return uint32(p.ActiveMTU.Bytes()), nil
}
