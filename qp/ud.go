package qp

import (
	"cmp"
	"fmt"

	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// AHSpec describe the path of an address handle. On RoCE every path is
// global: DGID and SGID are required.
type AHSpec struct {
	DGID uverbs.GID // the destination GID (a multicast group's GID too)
	// SGID is the local GID entry to send from, found by address
	// (uverbs.Context.FindGID) or by netdev (NetdevGID); the zero entry is
	// refused.
	SGID         uverbs.GIDEntry
	HopLimit     uint8 // IP TTL / hop limit; 0 means 64
	Port         uint8 // 0 means SGID's port
	TrafficClass uint8
	FlowLabel    uint32
	SL           uint8
}

// AH is an address handle: where a UD send goes (SendWR.AH). Make one with
// NewAH; Close destroys it, and the Context's Close destroys it if the
// caller has not.
type AH struct {
	core *rxe.AH
}

// Num is the AH number the kernel assigned, the only address a UD request
// carries on the wire to rdma_rxe.
func (a *AH) Num() uint32 { return a.core.Num() }

// Close destroys the address handle. It is idempotent; requests posted with
// it must have completed.
func (a *AH) Close() error { return a.core.Close() }

// Verbs returns the kernel-object layer's address handle (for providers and
// diagnostics: its handle and attributes).
func (a *AH) Verbs() *uverbs.AH { return a.core.Verbs() }

// NewAH creates an address handle towards p.DGID on pd's device, with the
// kernel's AH number, so UD work requests carry only that number.
func NewAH(pd *uverbs.PD, p AHSpec) (*AH, error) {
	if p.DGID.IsZero() {
		return nil, fmt.Errorf("qp: create_ah: the destination GID is zero (RoCE needs it): %w", unix.EINVAL)
	}
	sgid, port, err := sourceGID("create_ah", p.SGID, p.Port)
	if err != nil {
		return nil, err
	}
	attr := uverbs.GlobalAH(p.DGID, sgid, cmp.Or(p.HopLimit, defaultHopLimit))
	attr.PortNum = port
	attr.GRH.TrafficClass, attr.GRH.FlowLabel, attr.SL = p.TrafficClass, p.FlowLabel, p.SL
	core, err := rxe.CreateAH(pd, attr)
	if err != nil {
		return nil, err
	}
	return &AH{core: core}, nil
}

// MulticastQPN is the destination QP number of a datagram sent to a
// multicast group: every QP attached to the group receives it.
const MulticastQPN = 0xffffff

// UDOptions are the attributes ActivateUD sets.
type UDOptions struct {
	// QKey is the Q_Key datagrams to this QP must carry; others are
	// dropped by the receiving rxe without a trace on either side.
	QKey      uint32
	SendPSN   uint32 // the first send PSN (24 bits)
	Port      uint8  // 0 means port 1
	PKeyIndex uint16
}

// ActivateUD takes a UD queue pair from RESET (or INIT) to RTS, as
// ibv_ud_pingpong does: INIT with port, P_Key index and Q_Key, RTR with
// nothing else, RTS with the send PSN. Post receives from INIT on, before
// datagrams can arrive.
func (q *QP) ActivateUD(o UDOptions) error {
	if q.typ != UD {
		return fmt.Errorf("qp: activate UD: a %v QP: %w", q.typ, unix.EINVAL)
	}
	if err := q.closedError("activate UD"); err != nil {
		return err
	}
	if q.State() == StateReset {
		if err := q.ToInit(InitParams{Port: o.Port, PKeyIndex: o.PKeyIndex, QKey: o.QKey}); err != nil {
			return err
		}
	}
	if err := q.ToRTR(RTRParams{}); err != nil {
		return err
	}
	return q.ToRTS(RTSParams{SQPSN: o.SendPSN})
}

// transportMask is mask without the attributes q's transport does not take
// in the transition to state (the kernel refuses a modify carrying any of
// them): UC has no RDMA READ or RNR attributes and no ACK timeout or
// retries; UD takes a Q_Key instead of access flags and no path at all.
func (q *QP) transportMask(state State, mask AttrMask) AttrMask {
	switch q.typ {
	case UC:
		switch state {
		case StateRTR:
			mask &^= AttrMaxDestRdAtomic | AttrMinRNRTimer
		case StateRTS:
			mask &^= AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic
		}
	case UD:
		switch state {
		case StateInit:
			mask = mask&^AttrAccessFlags | AttrQKey
		case StateRTR:
			mask = AttrState
		case StateRTS:
			mask = AttrState | AttrSQPSN
		}
	}
	return mask
}

// AttachMulticast joins a UD QP to the multicast group gid: datagrams sent
// to the group's GID with destination QPN MulticastQPN reach it. On RoCE
// this adds no IGMP/MLD membership: the receiving netdev must accept the
// group's IP traffic (a socket's membership on it, for example).
func (q *QP) AttachMulticast(gid uverbs.GID) error {
	if q.typ != UD {
		return fmt.Errorf("qp: attach_mcast: a %v QP: %w", q.typ, unix.EINVAL)
	}
	return q.core.Verbs().AttachMcast(gid, 0)
}

// DetachMulticast removes a UD QP from the multicast group gid.
func (q *QP) DetachMulticast(gid uverbs.GID) error {
	if q.typ != UD {
		return fmt.Errorf("qp: detach_mcast: a %v QP: %w", q.typ, unix.EINVAL)
	}
	return q.core.Verbs().DetachMcast(gid, 0)
}
