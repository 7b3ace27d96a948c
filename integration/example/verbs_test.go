package example

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
	"github.com/pureverbs/pureverbs/uverbs"
)

// end is one side of an RC connection: a device context, a PD, a
// registered off-heap buffer, one CQ and one QP. All the verbs calls of the
// example are in this file.
type end struct {
	ctx  *uverbs.Context
	port uverbs.PortAttr
	gid  uverbs.GIDEntry
	pd   *uverbs.PD
	buf  *uverbs.Buffer
	mr   *uverbs.MR
	cq   *cq.CQ
	qp   *qp.QP
}

// openEnd opens everything one side needs on the rxe device of e.
func openEnd(e topology.Endpoint) (*end, error) {
	d, err := uverbs.DeviceByName(e.RDMA)
	if err != nil {
		return nil, err
	}
	x := &end{}
	if x.ctx, err = uverbs.Open(d); err != nil {
		return nil, err
	}
	if x.port, err = x.ctx.QueryPort(1); err != nil {
		return x, err
	}
	// The RoCE v2 GID of the endpoint's address (rxetest waited for it).
	addr, _ := netip.AddrFromSlice(e.Addr.IP.To4())
	if x.gid, err = x.ctx.FindGID(1, addr); err != nil {
		return x, err
	}
	if x.pd, err = x.ctx.AllocPD(); err != nil {
		return x, err
	}
	if x.buf, err = uverbs.NewBuffer(4096, uverbs.BufferOptions{}); err != nil {
		return x, err
	}
	if x.mr, err = x.pd.RegisterMR(x.buf, uverbs.AccessLocalWrite); err != nil {
		return x, err
	}
	if x.cq, err = cq.New(x.ctx, 16, nil); err != nil {
		return x, err
	}
	x.qp, err = qp.New(x.pd, qp.Spec{Type: qp.RC, SendCQ: x.cq, RecvCQ: x.cq,
		Cap: qp.Cap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	return x, err
}

// close releases what openEnd made: the Context's Close destroys the QP,
// CQ, MR and PD still open under it; the buffer is ours.
func (x *end) close() {
	if x.ctx != nil {
		x.ctx.Close()
	}
	if x.buf != nil {
		x.buf.Close()
	}
}

// connect brings x's QP to RTS aimed at the peer's in one call, from the
// record two programs would exchange out of band (qp.Peer's MarshalText).
func (x *end) connect(peer *end) error {
	return x.qp.Connect(qp.Peer{QPN: peer.qp.Num(), PSN: psn(peer.qp), GID: peer.gid.GID},
		qp.ConnectOptions{SGID: x.gid, PathMTU: x.port.ActiveMTU, SendPSN: psn(x.qp)})
}

func psn(q *qp.QP) uint32 { return q.Num() * 0x9e37 & 0xffffff }

// sge is the first n bytes of x's buffer.
func (x *end) sge(n int) uverbs.SGE {
	sge, err := x.mr.SGE(0, n)
	if err != nil {
		panic(err) // the example only asks for what the buffer holds
	}
	return sge
}

// postRecv offers x's buffer for one incoming message.
func (x *end) postRecv(id uint64) error {
	return x.qp.PostRecv([]qp.RecvWR{{ID: id, SGEs: []uverbs.SGE{x.sge(x.buf.Len())}}})
}

// send sends the first n bytes of x's buffer, signaled.
func (x *end) send(id uint64, n int) error {
	return x.qp.PostSend([]qp.SendWR{{ID: id, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{x.sge(n)}}})
}

// wait polls x's CQ for one completion, failing on an error status or
// after limit (rxe retries a broken path forever instead of failing).
func (x *end) wait(limit time.Duration) (id uint64, n uint32, err error) {
	wc := make([]cq.WC, 1)
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Microsecond) {
		k, err := x.cq.Poll(wc)
		if err != nil {
			return 0, 0, err
		}
		if k == 1 {
			if wc[0].Status != 0 { // 0 is IBV_WC_SUCCESS
				return 0, 0, fmt.Errorf("completion %d: %v", wc[0].WRID, wc[0].Status)
			}
			return wc[0].WRID, wc[0].ByteLen, nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("no completion after %v", limit)
		}
	}
}
