package rxe

import (
	"testing"
	"unsafe"
)

// The expected values were computed with gcc from /usr/include/rdma/rdma_user_rxe.h
// and /usr/include/rdma/ib_user_verbs.h (sizeof/offsetof, x86-64; the layouts
// have no pointer or long fields, so they are the same on arm64).

type layout struct {
	name string
	got  uintptr
	want uintptr
}

func checkLayout(t *testing.T, rows []layout) {
	t.Helper()
	for _, r := range rows {
		if r.got != r.want {
			t.Errorf("%s = %d, want %d", r.name, r.got, r.want)
		}
	}
}

func TestLayoutMMInfo(t *testing.T) {
	var m mmInfo
	var cq createCQResp
	var qp createQPResp
	checkLayout(t, []layout{
		{"sizeof(struct mminfo)", unsafe.Sizeof(m), 16},
		{"mminfo.offset", unsafe.Offsetof(m.offset), 0},
		{"mminfo.size", unsafe.Offsetof(m.size), 8},
		{"sizeof(struct rxe_create_cq_resp)", unsafe.Sizeof(cq), 16},
		{"sizeof(struct rxe_create_qp_resp)", unsafe.Sizeof(qp), 32},
		{"rxe_create_qp_resp.rq_mi", unsafe.Offsetof(qp.rqMI), 0},
		{"rxe_create_qp_resp.sq_mi", unsafe.Offsetof(qp.sqMI), 16},
	})
}

func TestLayoutAV(t *testing.T) {
	var a addressVector
	var g globalRoute
	checkLayout(t, []layout{
		{"sizeof(struct rxe_global_route)", unsafe.Sizeof(g), 24},
		{"grh.flow_label", unsafe.Offsetof(g.flowLabel), 16},
		{"grh.sgid_index", unsafe.Offsetof(g.sgidIndex), 20},
		{"grh.hop_limit", unsafe.Offsetof(g.hopLimit), 21},
		{"grh.traffic_class", unsafe.Offsetof(g.trafficClass), 22},
		{"sizeof(struct rxe_av)", unsafe.Sizeof(a), 88},
		{"av.port_num", unsafe.Offsetof(a.portNum), 0},
		{"av.network_type", unsafe.Offsetof(a.networkType), 1},
		{"av.dmac", unsafe.Offsetof(a.dmac), 2},
		{"av.grh", unsafe.Offsetof(a.grh), 8},
		{"av.sgid_addr", unsafe.Offsetof(a.sgidAddr), 32},
		{"av.dgid_addr", unsafe.Offsetof(a.dgidAddr), 60},
	})
}

func TestLayoutSendWR(t *testing.T) {
	var w sendWR
	wr := unsafe.Offsetof(w.wr)
	var r rdmaWR
	var u udWR
	checkLayout(t, []layout{
		{"sizeof(struct rxe_send_wr)", unsafe.Sizeof(w), 144},
		{"wr_id", unsafe.Offsetof(w.wrID), 0},
		{"opcode", unsafe.Offsetof(w.opcode), 12},
		{"send_flags", unsafe.Offsetof(w.sendFlags), 16},
		{"ex.imm_data", unsafe.Offsetof(w.ex), 20},
		{"wr.rdma.remote_addr", wr + unsafe.Offsetof(r.remoteAddr), 24},
		{"wr.rdma.rkey", wr + unsafe.Offsetof(r.rkey), 32},
		{"wr.ud.remote_qpn", wr + unsafe.Offsetof(u.remoteQPN), 24},
		{"wr.ud.remote_qkey", wr + unsafe.Offsetof(u.remoteQKey), 28},
		{"wr.ud.pkey_index", wr + unsafe.Offsetof(u.pkeyIndex), 32},
		{"wr.ud.ah_num", wr + unsafe.Offsetof(u.ahNum), 36},
		{"wr.ud.av", wr + unsafe.Offsetof(u.av), 56},
	})
	if got := uintptr(unsafe.Pointer(w.rdma())) - uintptr(unsafe.Pointer(&w)); got != 24 {
		t.Errorf("rdma() overlay at %d, want 24", got)
	}
}

func TestLayoutWQE(t *testing.T) {
	var s SGE
	var d dmaInfo
	var w sendWQE
	var r recvWQE
	checkLayout(t, []layout{
		{"sizeof(struct rxe_sge)", unsafe.Sizeof(s), 16},
		{"sge.addr", unsafe.Offsetof(s.Addr), 0},
		{"sge.length", unsafe.Offsetof(s.Length), 8},
		{"sge.lkey", unsafe.Offsetof(s.LKey), 12},
		{"sizeof(struct rxe_dma_info)", unsafe.Sizeof(d), 24},
		{"dma.length", unsafe.Offsetof(d.length), 0},
		{"dma.resid", unsafe.Offsetof(d.resid), 4},
		{"dma.cur_sge", unsafe.Offsetof(d.curSGE), 8},
		{"dma.num_sge", unsafe.Offsetof(d.numSGE), 12},
		{"dma.sge_offset", unsafe.Offsetof(d.sgeOffset), 16},
		{"sizeof(struct rxe_send_wqe)", unsafe.Sizeof(w), 208},
		{"send_wqe.wr", unsafe.Offsetof(w.wr), 0},
		{"send_wqe.status", unsafe.Offsetof(w.status), 144},
		{"send_wqe.state", unsafe.Offsetof(w.state), 148},
		{"send_wqe.iova", unsafe.Offsetof(w.iova), 152},
		{"send_wqe.mask", unsafe.Offsetof(w.mask), 160},
		{"send_wqe.first_psn", unsafe.Offsetof(w.firstPSN), 164},
		{"send_wqe.last_psn", unsafe.Offsetof(w.lastPSN), 168},
		{"send_wqe.ack_length", unsafe.Offsetof(w.ackLength), 172},
		{"send_wqe.ssn", unsafe.Offsetof(w.ssn), 176},
		{"send_wqe.has_rd_atomic", unsafe.Offsetof(w.hasRdAtomic), 180},
		{"send_wqe.dma", unsafe.Offsetof(w.dma), 184},
		{"send_wqe.dma.sge", uintptr(sendWQESize), 208},
		{"sizeof(struct rxe_recv_wqe)", unsafe.Sizeof(r), 40},
		{"recv_wqe.wr_id", unsafe.Offsetof(r.wrID), 0},
		{"recv_wqe.dma", unsafe.Offsetof(r.dma), 16},
		{"recv_wqe.dma.sge", uintptr(recvWQESize), 40},
	})
}

func TestLayoutUverbsWC(t *testing.T) {
	var w uverbsWC
	checkLayout(t, []layout{
		{"sizeof(struct ib_uverbs_wc)", unsafe.Sizeof(w), 48},
		{"wr_id", unsafe.Offsetof(w.wrID), 0},
		{"status", unsafe.Offsetof(w.status), 8},
		{"opcode", unsafe.Offsetof(w.opcode), 12},
		{"vendor_err", unsafe.Offsetof(w.vendorErr), 16},
		{"byte_len", unsafe.Offsetof(w.byteLen), 20},
		{"ex.imm_data", unsafe.Offsetof(w.ex), 24},
		{"qp_num", unsafe.Offsetof(w.qpNum), 28},
		{"src_qp", unsafe.Offsetof(w.srcQP), 32},
		{"wc_flags", unsafe.Offsetof(w.wcFlags), 36},
		{"pkey_index", unsafe.Offsetof(w.pkeyIndex), 40},
		{"slid", unsafe.Offsetof(w.slid), 42},
		{"sl", unsafe.Offsetof(w.sl), 44},
		{"dlid_path_bits", unsafe.Offsetof(w.dlidPathBits), 45},
		{"port_num", unsafe.Offsetof(w.portNum), 46},
	})
}
