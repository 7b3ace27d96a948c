package main

import (
	"errors"
	"fmt"

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

// endpoint is one end: the objects ibv_ud_pingpong makes, in its order
// (pp.Open), with a UD QP. Datagrams are received into the whole buffer
// (GRH area first) and sent from offset 40.
type endpoint struct {
	*pp.Objects
	o *options
}

// openSession makes the end with a UD QP and the Q_Key, checking -s
// against the port's active MTU once the device is open, and the session
// over it.
func openSession(o *options) (*pp.Session, error) {
	objs, err := pp.Open(pp.Spec{Options: o.Options, Type: qp.UD, Access: uverbs.AccessLocalWrite,
		GRHArea: grhLen, QKey: qkey, Opened: func(devctx *uverbs.Context) error {
			port, err := devctx.QueryPort(o.IBPort)
			if err != nil {
				return fmt.Errorf("Unable to query port info for port %d: %w", o.IBPort, err)
			}
			if mtu := port.ActiveMTU.Bytes(); o.Size > mtu {
				return fmt.Errorf("Requested size larger than port MTU (%d)", mtu)
			}
			return nil
		}})
	if err != nil {
		return nil, err
	}
	e := &endpoint{Objects: objs, o: o}
	return &pp.Session{Options: o.Options, Validate: o.validate, LocalSep: ":", End: objs,
		LocalDest: e.localDest, Connect: e.connect}, nil
}

// localDest is this end's address: the port's LID (0 on RoCE), the GID at
// -g (none without it), the QP number and psn.
func (e *endpoint) localDest(psn uint32) (pp.Dest, error) {
	port, err := e.Ctx.QueryPort(e.o.IBPort)
	if err != nil {
		return pp.Dest{}, fmt.Errorf("Couldn't get port info: %w", err)
	}
	d := pp.Dest{LID: port.LID, QPN: e.QP.Num(), PSN: psn}
	if e.o.GIDIndex >= 0 {
		g, err := e.Ctx.QueryGID(e.o.IBPort, e.o.GIDIndex)
		if err != nil {
			return pp.Dest{}, fmt.Errorf("Could not get local gid for gid index %d: %w", e.o.GIDIndex, err)
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
	sgid, err := e.Ctx.QueryGID(e.o.IBPort, e.o.GIDIndex)
	if err != nil {
		return fmt.Errorf("Failed to create AH: local gid index %d: %w", e.o.GIDIndex, err)
	}
	ah, err := qp.NewAH(e.PD, qp.AHSpec{DGID: remote.GID, SGID: sgid, HopLimit: hopLimit, Port: e.o.IBPort, SL: e.o.SL})
	if err != nil {
		return fmt.Errorf("Failed to create AH: %w", err)
	}
	e.AH = ah
	e.Send[0].AH, e.Send[0].RemoteQPN = ah, remote.QPN
	return nil
}
