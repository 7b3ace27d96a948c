package qp

import (
	"cmp"
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Defaults the transition helpers use for zero fields, as rdma-core's
// ibv_rc_pingpong chooses them, except where rxe needs otherwise.
const (
	defaultPort        = 1
	defaultPathMTU     = uverbs.MTU1024 // rxe on a 1500-byte netdev
	defaultHopLimit    = 64
	defaultRdAtomic    = 1
	defaultMinRNRTimer = 12 // 0.64 ms; 1 (0.01 ms) causes RNR-NAK storms on rxe
	defaultTimeout     = 14 // 4.096 µs * 2^14 ≈ 67 ms
	defaultRetryCnt    = 6  // rxe takes 7 as "retry forever": a broken path would hang
	defaultRNRRetry    = 7  // retry RNR NAKs forever: the peer posts receives when it can
)

// InitParams are the RESET→INIT attributes.
type InitParams struct {
	Port      uint8 // 0 means port 1
	PKeyIndex uint16
	// Access is what the remote side may do (uverbs.AccessRemoteWrite,
	// uverbs.AccessRemoteRead, uverbs.AccessRemoteAtomic); not on UD.
	Access uverbs.Access
	// QKey is a UD QP's Q_Key (UD only, where it replaces Access).
	QKey uint32
}

// ToInit moves the QP from RESET to INIT.
func (q *QP) ToInit(p InitParams) error {
	attr := Attr{State: StateInit, PKeyIndex: p.PKeyIndex, PortNum: cmp.Or(p.Port, defaultPort), AccessFlags: p.Access, QKey: p.QKey}
	return q.Modify(&attr, q.transportMask(StateInit, AttrState|AttrPKeyIndex|AttrPort|AttrAccessFlags))
}

// RTRParams are the INIT→RTR attributes: who the peer is and how to reach
// it. On RoCE every path of a connected QP is global: DGID and SGID are
// required (a UD QP takes none of these).
type RTRParams struct {
	DestQPN uint32     // the peer's QP number
	RQPSN   uint32     // the peer's initial send PSN (24 bits)
	PathMTU uverbs.MTU // 0 means 1024; use the port's active MTU
	DGID    uverbs.GID // the peer's GID
	// SGID is the local GID entry to send from, found by address
	// (uverbs.Context.FindGID) or by netdev (NetdevGID); the zero entry is
	// refused, never taken for GID 0.
	SGID     uverbs.GIDEntry
	HopLimit uint8 // 0 means 64
	Port     uint8 // 0 means SGID's port
	// MaxDestRdAtomic is how many RDMA READs the peer may have outstanding
	// here; 0 means 1.
	MaxDestRdAtomic uint8
	// MinRNRTimer is the RNR NAK delay code; 0 means 12 (0.64 ms). 1 causes
	// RNR-NAK storms on rxe.
	MinRNRTimer uint8
}

// ToRTR moves the QP from INIT to RTR (ready to receive). A UC QP takes
// no RDMA READ or RNR attributes (MaxDestRdAtomic, MinRNRTimer are not
// sent); a UD QP takes none of these parameters.
func (q *QP) ToRTR(p RTRParams) error {
	if err := q.closedError("modify_qp"); err != nil {
		return err
	}
	if q.typ == UD {
		attr := Attr{State: StateRTR}
		return q.Modify(&attr, q.transportMask(StateRTR, AttrState))
	}
	sgid, port, err := sourceGID("modify_qp", p.SGID, p.Port)
	if err != nil {
		return err
	}
	attr := Attr{
		State:           StateRTR,
		PathMTU:         cmp.Or(p.PathMTU, defaultPathMTU),
		DestQPNum:       p.DestQPN,
		RQPSN:           p.RQPSN,
		MaxDestRdAtomic: cmp.Or(p.MaxDestRdAtomic, defaultRdAtomic),
		MinRNRTimer:     cmp.Or(p.MinRNRTimer, defaultMinRNRTimer),
		AH: uverbs.AHAttr{
			IsGlobal: true,
			PortNum:  port,
			GRH: uverbs.GlobalRoute{
				DGID:      p.DGID,
				SGIDIndex: sgid,
				HopLimit:  cmp.Or(p.HopLimit, defaultHopLimit),
			},
		},
	}
	return q.Modify(&attr, q.transportMask(StateRTR, AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer))
}

// RTSParams are the RTR→RTS attributes.
type RTSParams struct {
	SQPSN       uint32 // this side's initial send PSN (24 bits)
	Timeout     uint8  // ACK timeout code; 0 means 14 (≈67 ms)
	RetryCnt    uint8  // transport retries; 0 means 6
	RNRRetry    uint8  // RNR retries; 0 means 7 (forever)
	MaxRdAtomic uint8  // RDMA READs outstanding from here; 0 means 1
}

// ToRTS moves the QP from RTR to RTS (ready to send). UC and UD QPs take
// only the send PSN (nothing else is sent). The zero defaults
// cannot express a literal 0; use Modify for that.
func (q *QP) ToRTS(p RTSParams) error {
	attr := Attr{
		State:       StateRTS,
		SQPSN:       p.SQPSN,
		Timeout:     cmp.Or(p.Timeout, defaultTimeout),
		RetryCnt:    cmp.Or(p.RetryCnt, defaultRetryCnt),
		RNRRetry:    cmp.Or(p.RNRRetry, defaultRNRRetry),
		MaxRdAtomic: cmp.Or(p.MaxRdAtomic, defaultRdAtomic),
	}
	return q.Modify(&attr, q.transportMask(StateRTS, AttrState|AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic))
}

// ToError moves the QP to ERROR: outstanding and posted work completes with
// WR_FLUSH_ERR.
func (q *QP) ToError() error {
	attr := Attr{State: StateError}
	return q.Modify(&attr, AttrState)
}

// sourceGID checks a path's local GID entry and returns its table index and
// the port: port if set (it must be the entry's), else the entry's. The
// zero entry is an error: index 0 is a real GID (the IPv6 link-local one),
// which a forgotten field must not pick silently.
func sourceGID(verb string, e uverbs.GIDEntry, port uint8) (index, p uint8, err error) {
	if e.GID.IsZero() {
		return 0, 0, fmt.Errorf("qp: %s: no source GID: set SGID to an entry from uverbs.Context.FindGID, NetdevGID or QueryGID: %w", verb, unix.EINVAL)
	}
	if e.Index < 0 || e.Index > 255 {
		return 0, 0, fmt.Errorf("qp: %s: source GID index %d out of range: %w", verb, e.Index, unix.EINVAL)
	}
	if e.Port != 0 && port != 0 && port != e.Port {
		return 0, 0, fmt.Errorf("qp: %s: source GID %v is on port %d, not %d: %w", verb, e.GID, e.Port, port, unix.EINVAL)
	}
	return uint8(e.Index), cmp.Or(port, e.Port, defaultPort), nil
}
