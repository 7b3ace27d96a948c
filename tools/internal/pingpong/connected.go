package pingpong

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// ConnectedEnd is one end of rc- or uc-pingpong: its verbs objects and
// the spec they were made to.
type ConnectedEnd struct {
	*Objects
	p Spec
}

// OpenConnected makes an end of a connected QP (p.Type RC or UC) with Open.
func OpenConnected(p Spec) (*ConnectedEnd, error) {
	o, err := Open(p)
	if err != nil {
		return nil, err
	}
	return &ConnectedEnd{Objects: o, p: p}, nil
}

// Session is the ping-pong over e as rc- and uc-pingpong run it: connect
// takes the QP from INIT to RTS, validate is -c.
func (e *ConnectedEnd) Session(validate bool, connect func(remote Dest, psn uint32) error) *Session {
	return &Session{Options: e.p.Options, Validate: validate, LocalSep: ",", End: e.Objects,
		LocalDest: e.LocalDest, Connect: connect}
}

// LocalDest is this end's address: the port's LID (0 on RoCE, where the
// GID is what matters), the GID at -g (none without it), the QP number and
// psn.
func (e *ConnectedEnd) LocalDest(psn uint32) (Dest, error) {
	port, err := e.Ctx.QueryPort(e.p.IBPort)
	if err != nil {
		return Dest{}, fmt.Errorf("Couldn't get port info: %w", err)
	}
	d := Dest{LID: port.LID, QPN: e.QP.Num(), PSN: psn}
	if port.LinkLayer != uverbs.LinkLayerEthernet && d.LID == 0 {
		return Dest{}, errors.New("Couldn't get local LID")
	}
	if e.p.GIDIndex >= 0 {
		g, err := e.Ctx.QueryGID(e.p.IBPort, e.p.GIDIndex)
		if err != nil {
			return Dest{}, fmt.Errorf("can't read sgid of index %d: %w", e.p.GIDIndex, err)
		}
		d.GID = g.GID
	}
	return d, nil
}

// RTRBase is the RTR part both tools share: the path MTU, the peer's QPN
// and PSN, the address (port, -l's SL, LID) and, when the peer sent a GID,
// a GRH with hop limit 1 from the GID at -g; and its attribute mask.
func (e *ConnectedEnd) RTRBase(remote Dest, mtu uverbs.MTU) (qp.Attr, qp.AttrMask) {
	rtr := qp.Attr{
		State:     qp.StateRTR,
		PathMTU:   mtu,
		DestQPNum: remote.QPN,
		RQPSN:     remote.PSN,
		AH:        uverbs.AHAttr{DLID: remote.LID, SL: e.p.SL, PortNum: e.p.IBPort},
	}
	if remote.HasGlobalRoute() {
		rtr.AH.IsGlobal = true
		rtr.AH.GRH = uverbs.GlobalRoute{DGID: remote.GID, HopLimit: 1, SGIDIndex: uint8(e.p.GIDIndex)}
	}
	return rtr, qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
}
