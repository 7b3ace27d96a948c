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
	o     *options
	ctx   *uverbs.Context
	ch    *cq.Channel // nil when polling
	pd    *uverbs.PD
	buf   *uverbs.Buffer
	mr    *uverbs.MR
	cq    *cq.CQ
	qp    *qp.QP
	ah    *qp.AH
	recv  [1]qp.RecvWR
	send  [1]qp.SendWR
	rsge  [1]qp.SGE
	ssge  [1]qp.SGE
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
			err = errors.Join(err, e.close())
			e = nil
		}
	}()
	if e.buf, err = uverbs.NewBuffer(o.size+grhLen, uverbs.BufferOptions{}); err != nil {
		return e, fmt.Errorf("Couldn't allocate work buf.: %w", err)
	}
	b := e.buf.Bytes()[:o.size+grhLen]
	for i := range b {
		b[i] = 0x7b // the C tool's fill byte
	}
	e.inner = b[grhLen:]
	if e.ctx, err = uverbs.Open(dev); err != nil {
		return e, fmt.Errorf("Couldn't get context for %s: %w", dev.Name, err)
	}
	port, err := e.ctx.QueryPort(o.ibPort)
	if err != nil {
		return e, fmt.Errorf("Unable to query port info for port %d: %w", o.ibPort, err)
	}
	if mtu := port.ActiveMTU.Bytes(); o.size > mtu {
		return e, fmt.Errorf("Requested size larger than port MTU (%d)", mtu)
	}
	if o.events {
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
	if e.cq, err = cq.New(e.ctx, o.rxDepth+1, e.ch); err != nil {
		return e, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	e.qp, err = qp.New(e.pd, qp.InitAttr{
		Type:   qp.UD,
		SendCQ: e.cq,
		RecvCQ: e.cq,
		Cap:    qp.Cap{MaxSendWR: 1, MaxRecvWR: uint32(o.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return e, fmt.Errorf("Couldn't create QP: %w", err)
	}
	init := qp.Attr{State: qp.Init, PKeyIndex: 0, PortNum: o.ibPort, QKey: qkey}
	if err = e.qp.Modify(&init, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey); err != nil {
		return e, fmt.Errorf("Failed to modify QP to INIT: %w", err)
	}
	if e.rsge[0], err = e.mr.SGE(0, o.size+grhLen); err != nil {
		return e, err
	}
	if e.ssge[0], err = e.mr.SGE(grhLen, o.size); err != nil {
		return e, err
	}
	e.recv[0] = qp.RecvWR{ID: pp.RecvWRID, SGEs: e.rsge[:]}
	e.send[0] = qp.SendWR{ID: pp.SendWRID, Opcode: qp.Send, Flags: qp.Signaled, SGEs: e.ssge[:], RemoteQKey: qkey}
	if e.qp.Cap().MaxInline >= uint32(o.size) {
		e.send[0].Flags |= qp.Inline
		e.send[0].SGEs, e.send[0].Inline = nil, e.inner
	}
	return e, nil
}

// localDest is this end's address: the port's LID (0 on RoCE), the GID at
// -g (none without it), the QP number and psn.
func (e *endpoint) localDest(psn uint32) (pp.Dest, error) {
	port, err := e.ctx.QueryPort(e.o.ibPort)
	if err != nil {
		return pp.Dest{}, fmt.Errorf("Couldn't get port info: %w", err)
	}
	d := pp.Dest{LID: port.LID, QPN: e.qp.Num(), PSN: psn}
	if e.o.gidIndex >= 0 {
		g, err := e.ctx.QueryGID(e.o.ibPort, e.o.gidIndex)
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
	rtr := qp.Attr{State: qp.RTR}
	if err := e.qp.Modify(&rtr, qp.AttrState); err != nil {
		return fmt.Errorf("Failed to modify QP to RTR: %w", err)
	}
	rts := qp.Attr{State: qp.RTS, SQPSN: myPSN}
	if err := e.qp.Modify(&rts, qp.AttrState|qp.AttrSQPSN); err != nil {
		return fmt.Errorf("Failed to modify QP to RTS: %w", err)
	}
	if !remote.HasGlobalRoute() {
		return errors.New("Failed to create AH: the peer sent no GID (use -g: RoCE needs a global route)")
	}
	ah, err := qp.NewAH(e.pd, qp.AHParams{DGID: remote.GID, SGIDIndex: uint8(e.o.gidIndex), HopLimit: hopLimit, Port: e.o.ibPort, SL: e.o.sl})
	if err != nil {
		return fmt.Errorf("Failed to create AH: %w", err)
	}
	e.ah = ah
	e.send[0].AH, e.send[0].RemoteQPN = ah, remote.QPN
	return nil
}

// PostRecv posts up to n receives of the buffer, one call each as the C
// tool does, and returns how many went in.
func (e *endpoint) PostRecv(n int) int {
	for i := range n {
		if e.qp.PostRecv(e.recv[:]) != nil {
			return i
		}
	}
	return n
}

// PostSend sends the message to the peer's QP, signalled.
func (e *endpoint) PostSend() error { return e.qp.PostSend(e.send[:]) }

// close releases what openEndpoint and connect made, in the C tool's
// order (the AH after the MR, before the PD), and reports every failure.
func (e *endpoint) close() error {
	var errs []error
	add := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("Couldn't %s: %w", what, err))
		}
	}
	if e.qp != nil {
		add("destroy QP", e.qp.Close())
	}
	if e.cq != nil {
		add("destroy CQ", e.cq.Close())
	}
	if e.mr != nil {
		add("deregister MR", e.mr.Close())
	}
	if e.ah != nil {
		add("destroy AH", e.ah.Close())
	}
	if e.pd != nil {
		add("deallocate PD", e.pd.Close())
	}
	if e.ch != nil {
		add("destroy completion channel", e.ch.Close())
	}
	if e.ctx != nil {
		add("release context", e.ctx.Close())
	}
	if e.buf != nil {
		add("free the buffer", e.buf.Close())
	}
	return errors.Join(errs...)
}
