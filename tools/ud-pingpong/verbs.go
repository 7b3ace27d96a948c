package main

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The UD specifics of ibv_ud_pingpong.
const (
	qkey     = 0x11111111 // every QP's Q_Key, and the one each send carries
	grhLen   = qp.GRHLen  // the GRH area in front of each received datagram
	hopLimit = 1          // the AH's hop limit (rdma-core v44)
)

// endpoint is one end's verbs objects, made in the order ibv_ud_pingpong
// makes them, and the work requests it posts over and over: datagrams are
// received into the whole buffer (GRH area first) and sent from offset 40.
type endpoint struct {
	o *options
	pp.Objects
	rsge  [1]uverbs.SGE
	ssge  [1]uverbs.SGE
	inner []byte // the message: the buffer past the GRH area
}

// openEndpoint picks the device, creates the buffer (size+40 bytes, filled
// with 0x7b), checks the size against the port's active MTU, then creates
// the completion channel (events mode), PD, MR, CQ (rx_depth+1 entries) and
// a UD QP with one send and rx_depth receive slots, and moves the QP to
// INIT with the Q_Key. Sends are inline when the device takes the whole
// message inline, as in the C tool. On failure everything made so far is
// released.
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
	if e.Buf, err = uverbs.NewBuffer(o.size+grhLen, uverbs.BufferOptions{}); err != nil {
		return e, fmt.Errorf("Couldn't allocate work buf.: %w", err)
	}
	b := e.Buf.Bytes()[:o.size+grhLen]
	for i := range b {
		b[i] = 0x7b // the C tool's fill byte
	}
	e.inner = b[grhLen:]
	if e.Ctx, err = uverbs.Open(dev); err != nil {
		return e, fmt.Errorf("Couldn't get context for %s: %w", dev.Name, err)
	}
	if err = e.WatchDevice(); err != nil {
		return e, err
	}
	port, err := e.Ctx.QueryPort(o.ibPort)
	if err != nil {
		return e, fmt.Errorf("Unable to query port info for port %d: %w", o.ibPort, err)
	}
	if mtu := port.ActiveMTU.Bytes(); o.size > mtu {
		return e, fmt.Errorf("Requested size larger than port MTU (%d)", mtu)
	}
	if o.events {
		if e.Ch, err = cq.NewChannel(e.Ctx); err != nil {
			return e, fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	if e.PD, err = e.Ctx.AllocPD(); err != nil {
		return e, fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	if e.MR, err = e.PD.RegisterMR(e.Buf, uverbs.AccessLocalWrite); err != nil {
		return e, fmt.Errorf("Couldn't register MR: %w", err)
	}
	if e.CQ, err = cq.New(e.Ctx, o.rxDepth+1, e.Ch); err != nil {
		return e, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	e.QP, err = qp.New(e.PD, qp.Spec{
		Type:   qp.UD,
		SendCQ: e.CQ,
		RecvCQ: e.CQ,
		Cap:    qp.Cap{MaxSendWR: 1, MaxRecvWR: uint32(o.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return e, fmt.Errorf("Couldn't create QP: %w", err)
	}
	init := qp.Attr{State: qp.StateInit, PKeyIndex: 0, PortNum: o.ibPort, QKey: qkey}
	if err = e.QP.Modify(&init, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey); err != nil {
		return e, fmt.Errorf("Failed to modify QP to INIT: %w", err)
	}
	if e.rsge[0], err = e.MR.SGE(0, o.size+grhLen); err != nil {
		return e, err
	}
	if e.ssge[0], err = e.MR.SGE(grhLen, o.size); err != nil {
		return e, err
	}
	e.Recv[0] = qp.RecvWR{ID: pp.RecvWRID, SGEs: e.rsge[:]}
	e.Send[0] = qp.SendWR{ID: pp.SendWRID, Opcode: qp.Send, Flags: qp.Signaled, SGEs: e.ssge[:], RemoteQKey: qkey}
	if e.QP.Cap().MaxInlineData >= uint32(o.size) {
		e.Send[0].Flags |= qp.Inline
		e.Send[0].SGEs, e.Send[0].Inline = nil, e.inner
	}
	return e, nil
}

// localDest is this end's address: the port's LID (0 on RoCE), the GID at
// -g (none without it), the QP number and psn.
func (e *endpoint) localDest(psn uint32) (pp.Dest, error) {
	port, err := e.Ctx.QueryPort(e.o.ibPort)
	if err != nil {
		return pp.Dest{}, fmt.Errorf("Couldn't get port info: %w", err)
	}
	d := pp.Dest{LID: port.LID, QPN: e.QP.Num(), PSN: psn}
	if e.o.gidIndex >= 0 {
		g, err := e.Ctx.QueryGID(e.o.ibPort, e.o.gidIndex)
		if err != nil {
			return pp.Dest{}, fmt.Errorf("Could not get local gid for gid index %d: %w", e.o.gidIndex, err)
		}
		d.GID = g.GID
	}
	return d, nil
}

// connect moves the QP to RTR (nothing but the state) and RTS (the send
// PSN), then makes the address handle towards remote: global, hop limit 1,
// when the peer sent a GID (RoCE cannot do without one), and aims the send
// at the peer's QP.
func (e *endpoint) connect(remote pp.Dest, myPSN uint32) error {
	rtr := qp.Attr{State: qp.StateRTR}
	if err := e.QP.Modify(&rtr, qp.AttrState); err != nil {
		return fmt.Errorf("Failed to modify QP to RTR: %w", err)
	}
	rts := qp.Attr{State: qp.StateRTS, SQPSN: myPSN}
	if err := e.QP.Modify(&rts, qp.AttrState|qp.AttrSQPSN); err != nil {
		return fmt.Errorf("Failed to modify QP to RTS: %w", err)
	}
	if !remote.HasGlobalRoute() {
		return errors.New("Failed to create AH: the peer sent no GID (use -g: RoCE needs a global route)")
	}
	sgid, err := e.Ctx.QueryGID(e.o.ibPort, e.o.gidIndex)
	if err != nil {
		return fmt.Errorf("Failed to create AH: local gid index %d: %w", e.o.gidIndex, err)
	}
	ah, err := qp.NewAH(e.PD, qp.AHSpec{DGID: remote.GID, SGID: sgid, HopLimit: hopLimit, Port: e.o.ibPort, SL: e.o.sl})
	if err != nil {
		return fmt.Errorf("Failed to create AH: %w", err)
	}
	e.AH = ah
	e.Send[0].AH, e.Send[0].RemoteQPN = ah, remote.QPN
	return nil
}
