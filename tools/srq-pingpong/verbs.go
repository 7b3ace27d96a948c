package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/tools/internal/devwatch"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// peerT is one QP's address record.
type peerT = qp.Peer

// endpoint is one end: a context, a buffer, one CQ, one SRQ and -q QPs.
type endpoint struct {
	o       *options
	ctx     *uverbs.Context
	unwatch func() // ends devwatch.Exit's watch of ctx's device
	buf     *uverbs.Buffer
	ch      *cq.Channel
	pd      *uverbs.PD
	mr      *uverbs.MR
	cq      *cq.CQ
	srq     *qp.SRQ
	qps     []*qp.QP
	qpIndex map[uint32]int
	sge     [1]uverbs.SGE
	recv    [1]qp.RecvWR
	send    [1]qp.SendWR
	routs   int
}

// openEndpoint is pp_init_ctx: buffer, context, channel (-e), PD, MR, a CQ
// of rx_depth+num_qp, an SRQ of rx_depth single-SGE requests, and the QPs
// on it (one send request each), moved to INIT.
func openEndpoint(o *options) (e *endpoint, err error) {
	dev, err := pp.PickDevice(o.IBDev)
	if err != nil {
		return nil, err
	}
	e = &endpoint{o: o, qpIndex: map[uint32]int{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
			e = nil
		}
	}()
	if e.buf, err = uverbs.NewBuffer(o.Size, uverbs.BufferOptions{}); err != nil {
		return e, fmt.Errorf("Couldn't allocate work buf.: %w", err)
	}
	if e.ctx, err = uverbs.Open(dev); err != nil {
		return e, fmt.Errorf("Couldn't get context for %s: %w", dev.Name, err)
	}
	if e.unwatch, err = devwatch.Exit(e.ctx, "srq-pingpong", os.Stderr); err != nil {
		return e, err
	}
	if o.Events {
		if e.ch, err = cq.NewChannel(e.ctx); err != nil {
			return e, fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return e, fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	if e.mr, err = e.pd.RegisterMR(e.buf, uverbs.AccessLocalWrite); err != nil {
		return e, fmt.Errorf("Couldn't register MR: %w", err)
	}
	if e.cq, err = cq.New(e.ctx, o.RxDepth+o.numQP, e.ch); err != nil {
		return e, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	if e.srq, err = qp.NewSRQ(e.pd, qp.SRQAttr{MaxWR: uint32(o.RxDepth), MaxSGE: 1}); err != nil {
		return e, fmt.Errorf("Couldn't create SRQ: %w", err)
	}
	if e.sge[0], err = e.mr.SGE(0, o.Size); err != nil {
		return e, err
	}
	e.recv[0] = qp.RecvWR{ID: pp.RecvWRID, SGEs: e.sge[:]}
	e.send[0] = qp.SendWR{ID: pp.SendWRID, Opcode: qp.Send, Flags: qp.Signaled, SGEs: e.sge[:]}
	for i := range o.numQP {
		q, err := qp.New(e.pd, qp.Spec{Type: qp.RC, SendCQ: e.cq, RecvCQ: e.cq, SRQ: e.srq, Cap: qp.Cap{MaxSendWR: 1, MaxSendSGE: 1}})
		if err != nil {
			return e, fmt.Errorf("Couldn't create QP[%d]: %w", i, err)
		}
		e.qps = append(e.qps, q)
		e.qpIndex[q.Num()] = i
		if q.Cap().MaxInlineData >= uint32(o.Size) {
			e.send[0].Flags |= qp.Inline
			e.send[0].SGEs, e.send[0].Inline = nil, e.buf.Bytes()[:o.Size]
		}
	}
	for i, q := range e.qps {
		init := qp.Attr{State: qp.StateInit, PKeyIndex: 0, PortNum: o.IBPort}
		if err := q.Modify(&init, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
			return e, fmt.Errorf("Failed to modify QP[%d] to INIT: %w", i, err)
		}
	}
	return e, nil
}

// fillSRQ posts receives to the SRQ until routs reaches n, as
// pp_post_recv does, one request at a time.
func (e *endpoint) fillSRQ(n int) error {
	for e.routs < n {
		if err := e.srq.PostRecv(e.recv[:]); err != nil {
			return fmt.Errorf("Couldn't post receive (%d): %w", e.routs, err)
		}
		e.routs++
	}
	return nil
}

// localPeers is each QP's address: the port's LID, the GID at -g (zero
// without it), its number and a random PSN.
func (e *endpoint) localPeers() ([]peerT, error) {
	port, err := e.ctx.QueryPort(e.o.IBPort)
	if err != nil {
		return nil, fmt.Errorf("Couldn't get port info: %w", err)
	}
	var gid uverbs.GID
	if e.o.GIDIndex >= 0 {
		g, err := e.ctx.QueryGID(e.o.IBPort, e.o.GIDIndex)
		if err != nil {
			return nil, fmt.Errorf("Could not get local gid for gid index %d: %w", e.o.GIDIndex, err)
		}
		gid = g.GID
	}
	if port.LinkLayer != uverbs.LinkLayerEthernet && port.LID == 0 {
		return nil, errors.New("Couldn't get local LID")
	}
	peers := make([]peerT, len(e.qps))
	for i, q := range e.qps {
		peers[i] = peerT{LID: port.LID, QPN: q.Num(), PSN: rand.Uint32() & 0xffffff, GID: gid}
	}
	return peers, nil
}

// connect is pp_connect_ctx: every QP i to RTR aimed at remote[i] (with a
// global route, hop limit 1, when the first remote GID has an interface
// id, as the C tool checks), then to RTS with the C tool's timeout 14,
// retry count 7 and RNR retry 7.
func (e *endpoint) connect(local, remote []peerT) error {
	global := [8]byte(remote[0].GID[8:]) != [8]byte{}
	for i, q := range e.qps {
		rtr := qp.Attr{
			State: qp.StateRTR, PathMTU: e.o.mtu, DestQPNum: remote[i].QPN, RQPSN: remote[i].PSN,
			MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: uverbs.AHAttr{DLID: remote[i].LID, SL: e.o.SL, PortNum: e.o.IBPort},
		}
		if global {
			rtr.AH.IsGlobal = true
			rtr.AH.GRH = uverbs.GlobalRoute{HopLimit: 1, DGID: remote[0].GID, SGIDIndex: uint8(e.o.GIDIndex)}
		}
		if err := q.Modify(&rtr, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
			return fmt.Errorf("Failed to modify QP[%d] to RTR: %w", i, err)
		}
		rts := qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: local[i].PSN, MaxRdAtomic: 1}
		if err := q.Modify(&rts, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrSQPSN|qp.AttrMaxQPRdAtomic); err != nil {
			return fmt.Errorf("Failed to modify QP[%d] to RTS: %w", i, err)
		}
	}
	return nil
}

// exchange is the C tool's main loop: the client starts a send on every
// QP; a QP sends again once both its last send and a receive on it have
// completed, until iters sends in total went out; receives are topped up
// when no more than num_qp remain. It returns the number of completion
// events it took (for Ack).
func (e *endpoint) exchange(client bool) (events int, err error) {
	pending := make([]int, len(e.qps))
	for i := range e.qps {
		pending[i] = pp.RecvWRID
		if client {
			if err := e.qps[i].PostSend(e.send[:]); err != nil {
				return 0, fmt.Errorf("Couldn't post send: %w", err)
			}
			pending[i] |= pp.SendWRID
		}
	}
	wc := make([]cq.WC, len(e.qps)+e.o.RxDepth)
	iters := e.o.Iters
	rcnt, scnt := 0, 0
	for rcnt < iters || scnt < iters {
		if e.o.Events {
			if _, err := e.ch.GetEvent(context.Background()); err != nil {
				return events, fmt.Errorf("Failed to get cq_event: %w", err)
			}
			events++
			if err := e.cq.ReqNotify(false); err != nil {
				return events, fmt.Errorf("Couldn't request CQ notification: %w", err)
			}
		}
		var ne int
		for {
			if ne, err = e.cq.Poll(wc); err != nil {
				return events, fmt.Errorf("poll CQ failed: %w", err)
			}
			if e.o.Events || ne > 0 {
				break
			}
		}
		for _, w := range wc[:ne] {
			if w.Status != cq.Success {
				return events, fmt.Errorf("Failed status %v (%d) for wr_id %d", w.Status, uint32(w.Status), int(w.WRID))
			}
			i, ok := e.qpIndex[w.QPNum]
			if !ok {
				return events, fmt.Errorf("Couldn't find QPN %06x", w.QPNum)
			}
			switch w.WRID {
			case pp.SendWRID:
				scnt++
			case pp.RecvWRID:
				if e.routs--; e.routs <= len(e.qps) {
					if err := e.fillSRQ(e.o.RxDepth); err != nil {
						return events, err
					}
				}
				rcnt++
			default:
				return events, fmt.Errorf("Completion for unknown wr_id %d", int(w.WRID))
			}
			pending[i] &^= int(w.WRID)
			if scnt < iters && pending[i] == 0 {
				if err := e.qps[i].PostSend(e.send[:]); err != nil {
					return events, fmt.Errorf("Couldn't post send: %w", err)
				}
				pending[i] = pp.RecvWRID | pp.SendWRID
			}
		}
	}
	return events, nil
}

// close is pp_close_ctx: QPs, SRQ, CQ, MR, PD, channel, context, buffer.
func (e *endpoint) close() error {
	var errs []error
	for i, q := range e.qps {
		if err := q.Close(); err != nil {
			errs = append(errs, fmt.Errorf("Couldn't destroy QP[%d]: %w", i, err))
		}
	}
	if e.srq != nil {
		if err := e.srq.Close(); err != nil {
			errs = append(errs, fmt.Errorf("Couldn't destroy SRQ: %w", err))
		}
	}
	if e.cq != nil {
		if err := e.cq.Close(); err != nil {
			errs = append(errs, fmt.Errorf("Couldn't destroy CQ: %w", err))
		}
	}
	if e.mr != nil {
		if err := e.mr.Close(); err != nil {
			errs = append(errs, fmt.Errorf("Couldn't deregister MR: %w", err))
		}
	}
	if e.pd != nil {
		if err := e.pd.Close(); err != nil {
			errs = append(errs, fmt.Errorf("Couldn't deallocate PD: %w", err))
		}
	}
	if e.ch != nil {
		if err := e.ch.Close(); err != nil {
			errs = append(errs, fmt.Errorf("Couldn't destroy completion channel: %w", err))
		}
	}
	if e.unwatch != nil {
		e.unwatch()
	}
	if e.ctx != nil {
		if err := e.ctx.Close(); err != nil {
			errs = append(errs, fmt.Errorf("Couldn't release context: %w", err))
		}
	}
	if e.buf != nil {
		errs = append(errs, e.buf.Close())
	}
	return errors.Join(errs...)
}
