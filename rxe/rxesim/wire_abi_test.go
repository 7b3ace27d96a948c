package rxesim

import (
	"testing"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

// The byte offsets the simulated kernel reads WQEs and writes completions
// at are the header's (gcc over rdma_user_rxe.h and ib_user_verbs.h).
func TestWireOffsetsFromHeaders(t *testing.T) {
	abicheck.Check(t, []string{"rdma/rdma_user_rxe.h", "rdma/ib_user_verbs.h"}, []abicheck.Pin{
		{C: "struct rxe_send_wqe", Exprs: map[string]uintptr{
			"offsetof(struct rxe_send_wqe, wr.wr_id)":               sendWRID,
			"offsetof(struct rxe_send_wqe, wr.opcode)":              sendOpcode,
			"offsetof(struct rxe_send_wqe, wr.send_flags)":          sendFlags,
			"offsetof(struct rxe_send_wqe, wr.ex.imm_data)":         sendImm,
			"offsetof(struct rxe_send_wqe, wr.wr.rdma.remote_addr)": sendRemoteAddr,
			"offsetof(struct rxe_send_wqe, wr.wr.rdma.rkey)":        sendRKey,
			"offsetof(struct rxe_send_wqe, dma.length)":             sendDMALength,
			"offsetof(struct rxe_send_wqe, dma.num_sge)":            sendDMANumSGE,
			"offsetof(struct rxe_send_wqe, dma.sge)":                sendWQEHeader,
		}},
		{C: "struct rxe_recv_wqe", Exprs: map[string]uintptr{
			"offsetof(struct rxe_recv_wqe, wr_id)":       recvWRID,
			"offsetof(struct rxe_recv_wqe, dma.length)":  recvDMALength,
			"offsetof(struct rxe_recv_wqe, dma.num_sge)": recvDMANumSGE,
			"offsetof(struct rxe_recv_wqe, dma.sge)":     recvWQEHeader,
		}},
		{C: "struct rxe_sge", Exprs: map[string]uintptr{"sizeof(struct rxe_sge)": sgeSize}},
		{C: "struct ib_uverbs_wc", Exprs: map[string]uintptr{
			"sizeof(struct ib_uverbs_wc)":                   wcSize,
			"offsetof(struct ib_uverbs_wc, wr_id)":          wcWRID,
			"offsetof(struct ib_uverbs_wc, status)":         wcStatus,
			"offsetof(struct ib_uverbs_wc, opcode)":         wcOpcode,
			"offsetof(struct ib_uverbs_wc, vendor_err)":     wcVendorErr,
			"offsetof(struct ib_uverbs_wc, byte_len)":       wcByteLen,
			"offsetof(struct ib_uverbs_wc, ex)":             wcEx,
			"offsetof(struct ib_uverbs_wc, qp_num)":         wcQPNum,
			"offsetof(struct ib_uverbs_wc, src_qp)":         wcSrcQP,
			"offsetof(struct ib_uverbs_wc, wc_flags)":       wcFlags,
			"offsetof(struct ib_uverbs_wc, pkey_index)":     wcPKeyIndex,
			"offsetof(struct ib_uverbs_wc, slid)":           wcSLID,
			"offsetof(struct ib_uverbs_wc, sl)":             wcSL,
			"offsetof(struct ib_uverbs_wc, dlid_path_bits)": wcPathBits,
			"offsetof(struct ib_uverbs_wc, port_num)":       wcPortNum,
		}},
	})
}
