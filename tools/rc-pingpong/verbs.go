package main

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// endpoint is one end's verbs objects, made in the order ibv_rc_pingpong
// makes them, and the work requests it posts over and over: one buffer is
// both sent from and received into.
type endpoint struct {
	o *options
	pp.Objects
	sge [1]qp.SGE
}

// openEndpoint picks the device, then creates the buffer, completion
// channel (events mode), PD, MR, CQ (rx_depth+1 entries) and an RC QP with
// one send and rx_depth receive slots, and moves the QP to INIT. Sends are
// inline when the device takes the whole message inline, as in the C tool.
// On failure everything made so far is released.
func openEndpoint(o *options) (e *endpoint, err error) {
	dev, err := pp.PickDevice(o.ibDev)
	if err != nil {
		return nil, err
	}
	e = &endpoint{o: o}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Close())
			e = nil
		}
	}()
	if e.Buf, err = uverbs.NewBuffer(o.size, uverbs.BufferOptions{}); err != nil {
		return e, fmt.Errorf("Couldn't allocate work buf.: %w", err)
	}
	b := e.Buf.Bytes()
	for i := range b {
		b[i] = 0x7b // the C tool's fill byte
	}
	if e.Ctx, err = uverbs.Open(dev); err != nil {
		return e, fmt.Errorf("Couldn't get context for %s: %w", dev.Name, err)
	}
	if o.events {
		if e.Ch, err = cq.NewChannel(e.Ctx); err != nil {
			return e, fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	if e.PD, err = e.Ctx.AllocPD(); err != nil {
		return e, fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	if o.ts {
		attr, err := e.Ctx.QueryDevice()
		if err != nil {
			return e, fmt.Errorf("Couldn't query device for its features: %w", err)
		}
		if attr.TimestampMask == 0 {
			return e, errors.New("The device isn't completion timestamp capable")
		}
		return e, errors.New("-t: completion timestamps are not supported by rc-pingpong")
	}
	access := uverbs.AccessLocalWrite
	if o.odp {
		access |= uverbs.AccessOnDemand
	}
	if e.MR, err = e.PD.RegisterMR(e.Buf, access); err != nil {
		return e, fmt.Errorf("Couldn't register MR: %w", err)
	}
	if e.CQ, err = cq.New(e.Ctx, o.rxDepth+1, e.Ch); err != nil {
		return e, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	e.QP, err = qp.New(e.PD, qp.InitAttr{
		Type:   qp.RC,
		SendCQ: e.CQ,
		RecvCQ: e.CQ,
		Cap:    qp.Cap{MaxSendWR: 1, MaxRecvWR: uint32(o.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return e, fmt.Errorf("Couldn't create QP: %w", err)
	}
	init := qp.Attr{State: qp.Init, PKeyIndex: 0, PortNum: o.ibPort}
	if err = e.QP.Modify(&init, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		return e, fmt.Errorf("Failed to modify QP to INIT: %w", err)
	}
	if e.sge[0], err = e.MR.SGE(0, o.size); err != nil {
		return e, err
	}
	e.Recv[0] = qp.RecvWR{ID: pp.RecvWRID, SGEs: e.sge[:]}
	e.Send[0] = qp.SendWR{ID: pp.SendWRID, Opcode: qp.Send, Flags: qp.Signaled, SGEs: e.sge[:]}
	if e.QP.Cap().MaxInline >= uint32(o.size) {
		e.Send[0].Flags |= qp.Inline
		e.Send[0].SGEs, e.Send[0].Inline = nil, b
	}
	return e, nil
}

// localDest is this end's address: the port's LID (0 on RoCE, where the GID
// is what matters), the GID at -g (none without it), the QP number and psn.
func (e *endpoint) localDest(psn uint32) (pp.Dest, error) {
	port, err := e.Ctx.QueryPort(e.o.ibPort)
	if err != nil {
		return pp.Dest{}, fmt.Errorf("Couldn't get port info: %w", err)
	}
	d := pp.Dest{LID: port.LID, QPN: e.QP.Num(), PSN: psn}
	if port.LinkLayer != uverbs.LinkLayerEthernet && d.LID == 0 {
		return pp.Dest{}, errors.New("Couldn't get local LID")
	}
	if e.o.gidIndex >= 0 {
		g, err := e.Ctx.QueryGID(e.o.ibPort, e.o.gidIndex)
		if err != nil {
			return pp.Dest{}, fmt.Errorf("can't read sgid of index %d: %w", e.o.gidIndex, err)
		}
		d.GID = g.GID
	}
	return d, nil
}

// connect moves the QP to RTR towards remote and then to RTS, with the C
// tool's attributes: a GRH (hop limit 1) only when the peer sent a GID,
// ACK timeout 14, seven retries of each kind, one RDMA read either way.
func (e *endpoint) connect(remote pp.Dest, myPSN uint32) error {
	rtr := qp.Attr{
		State:           qp.RTR,
		PathMTU:         e.o.mtu,
		DestQPNum:       remote.QPN,
		RQPSN:           remote.PSN,
		MaxDestRdAtomic: 1,
		MinRNRTimer:     12,
		AH:              uverbs.AHAttr{DLID: remote.LID, SL: e.o.sl, PortNum: e.o.ibPort},
	}
	if remote.HasGlobalRoute() {
		rtr.AH.IsGlobal = true
		rtr.AH.GRH = uverbs.GlobalRoute{DGID: remote.GID, HopLimit: 1, SGIDIndex: uint8(e.o.gidIndex)}
	}
	if err := e.QP.Modify(&rtr, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|
		qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		return fmt.Errorf("Failed to modify QP to RTR: %w", err)
	}
	rts := qp.Attr{State: qp.RTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: myPSN, MaxRdAtomic: 1}
	if err := e.QP.Modify(&rts, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|
		qp.AttrSQPSN|qp.AttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("Failed to modify QP to RTS: %w", err)
	}
	return nil
}
