package pingpong

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// ConnectedSpec are what rc- and uc-pingpong's command lines say about
// the end OpenConnected makes.
type ConnectedSpec struct {
	Device   string // -d; "" is the first device
	Port     uint8  // -i
	GIDIndex int    // -g; negative for none
	Size     int    // -s
	RxDepth  int    // -r
	Events   bool   // -e
	Type     qp.Type
	Access   uverbs.Access // the MR's
	// CheckDevice, when set, runs once the PD exists, where the C tool
	// checks the device for its options (rc-pingpong's -t).
	CheckDevice func(*uverbs.Context) error
}

// ConnectedEnd is one end of rc- or uc-pingpong: its verbs objects, made in
// the C tools' order, and the one receive and one send it posts over and
// over, from and into the same buffer.
type ConnectedEnd struct {
	Objects
	p   ConnectedSpec
	sge [1]uverbs.SGE
}

// OpenConnected picks the device, then creates the buffer, completion
// channel (events mode), PD, MR, CQ (rx_depth+1 entries) and a QP of
// p.Type with one send and rx_depth receive slots, and moves the QP to INIT
// granting no remote access. Sends are inline when the device takes the
// whole message inline, as in the C tools. On failure everything made so
// far is released.
func OpenConnected(p ConnectedSpec) (e *ConnectedEnd, err error) {
	dev, err := PickDevice(p.Device)
	if err != nil {
		return nil, err
	}
	e = &ConnectedEnd{p: p}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Close())
			e = nil
		}
	}()
	if e.Buf, err = uverbs.NewBuffer(p.Size, uverbs.BufferOptions{}); err != nil {
		return e, fmt.Errorf("Couldn't allocate work buf.: %w", err)
	}
	b := e.Buf.Bytes()
	for i := range b {
		b[i] = 0x7b // the C tools' fill byte
	}
	if e.Ctx, err = uverbs.Open(dev); err != nil {
		return e, fmt.Errorf("Couldn't get context for %s: %w", dev.Name, err)
	}
	if err = e.WatchDevice(); err != nil {
		return e, err
	}
	if p.Events {
		if e.Ch, err = cq.NewChannel(e.Ctx); err != nil {
			return e, fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	if e.PD, err = e.Ctx.AllocPD(); err != nil {
		return e, fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	if p.CheckDevice != nil {
		if err = p.CheckDevice(e.Ctx); err != nil {
			return e, err
		}
	}
	if e.MR, err = e.PD.RegisterMR(e.Buf, p.Access); err != nil {
		return e, fmt.Errorf("Couldn't register MR: %w", err)
	}
	if e.CQ, err = cq.New(e.Ctx, p.RxDepth+1, e.Ch); err != nil {
		return e, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	e.QP, err = qp.New(e.PD, qp.Spec{
		Type:   p.Type,
		SendCQ: e.CQ,
		RecvCQ: e.CQ,
		Cap:    qp.Cap{MaxSendWR: 1, MaxRecvWR: uint32(p.RxDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return e, fmt.Errorf("Couldn't create QP: %w", err)
	}
	init := qp.Attr{State: qp.StateInit, PKeyIndex: 0, PortNum: p.Port}
	if err = e.QP.Modify(&init, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		return e, fmt.Errorf("Failed to modify QP to INIT: %w", err)
	}
	if e.sge[0], err = e.MR.SGE(0, p.Size); err != nil {
		return e, err
	}
	e.Recv[0] = qp.RecvWR{ID: RecvWRID, SGEs: e.sge[:]}
	e.Send[0] = qp.SendWR{ID: SendWRID, Opcode: qp.Send, Flags: qp.Signaled, SGEs: e.sge[:]}
	if e.QP.Cap().MaxInlineData >= uint32(p.Size) {
		e.Send[0].Flags |= qp.Inline
		e.Send[0].SGEs, e.Send[0].Inline = nil, b
	}
	return e, nil
}

// LocalDest is this end's address: the port's LID (0 on RoCE, where the
// GID is what matters), the GID at -g (none without it), the QP number and
// psn.
func (e *ConnectedEnd) LocalDest(psn uint32) (Dest, error) {
	port, err := e.Ctx.QueryPort(e.p.Port)
	if err != nil {
		return Dest{}, fmt.Errorf("Couldn't get port info: %w", err)
	}
	d := Dest{LID: port.LID, QPN: e.QP.Num(), PSN: psn}
	if port.LinkLayer != uverbs.LinkLayerEthernet && d.LID == 0 {
		return Dest{}, errors.New("Couldn't get local LID")
	}
	if e.p.GIDIndex >= 0 {
		g, err := e.Ctx.QueryGID(e.p.Port, e.p.GIDIndex)
		if err != nil {
			return Dest{}, fmt.Errorf("can't read sgid of index %d: %w", e.p.GIDIndex, err)
		}
		d.GID = g.GID
	}
	return d, nil
}

// RTRBase is the RTR part both tools share: the path MTU, the peer's QPN
// and PSN, the address (port, SL, LID) and, when the peer sent a GID, a
// GRH with hop limit 1 from the GID at -g; and its attribute mask.
func (e *ConnectedEnd) RTRBase(remote Dest, mtu uverbs.MTU, sl uint8) (qp.Attr, qp.AttrMask) {
	rtr := qp.Attr{
		State:     qp.StateRTR,
		PathMTU:   mtu,
		DestQPNum: remote.QPN,
		RQPSN:     remote.PSN,
		AH:        uverbs.AHAttr{DLID: remote.LID, SL: sl, PortNum: e.p.Port},
	}
	if remote.HasGlobalRoute() {
		rtr.AH.IsGlobal = true
		rtr.AH.GRH = uverbs.GlobalRoute{DGID: remote.GID, HopLimit: 1, SGIDIndex: uint8(e.p.GIDIndex)}
	}
	return rtr, qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
}
