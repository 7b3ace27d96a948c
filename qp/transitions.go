package qp

import (
	"cmp"

	"github.com/pureverbs/pureverbs/uverbs"
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
	attr := Attr{State: Init, PKeyIndex: p.PKeyIndex, PortNum: cmp.Or(p.Port, defaultPort), AccessFlags: p.Access, QKey: p.QKey}
	return q.Modify(&attr, q.transportMask(Init, AttrState|AttrPKeyIndex|AttrPort|AttrAccessFlags))
}

// RTRParams are the INIT→RTR attributes: who the peer is and how to reach
// it. On RoCE every path is global: DGID and SGIDIndex are required.
type RTRParams struct {
	DestQPN uint32 // the peer's QP number
	RQPSN   uint32 // the peer's initial send PSN (24 bits)
	PathMTU MTU    // 0 means 1024; use the port's active MTU
	DGID    uverbs.GID
	// SGIDIndex picks the local GID (on rxe over IPv4, the IPv4-mapped
	// RoCE v2 entry, index 1 in the usual table).
	SGIDIndex uint8
	HopLimit  uint8 // 0 means 64
	Port      uint8 // 0 means port 1
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
	attr := Attr{
		State:           RTR,
		PathMTU:         cmp.Or(p.PathMTU, defaultPathMTU),
		DestQPNum:       p.DestQPN,
		RQPSN:           p.RQPSN,
		MaxDestRdAtomic: cmp.Or(p.MaxDestRdAtomic, defaultRdAtomic),
		MinRNRTimer:     cmp.Or(p.MinRNRTimer, defaultMinRNRTimer),
		AH: uverbs.AHAttr{
			IsGlobal: true,
			PortNum:  cmp.Or(p.Port, defaultPort),
			GRH: uverbs.GlobalRoute{
				DGID:      p.DGID,
				SGIDIndex: p.SGIDIndex,
				HopLimit:  cmp.Or(p.HopLimit, defaultHopLimit),
			},
		},
	}
	return q.Modify(&attr, q.transportMask(RTR, AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer))
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
		State:       RTS,
		SQPSN:       p.SQPSN,
		Timeout:     cmp.Or(p.Timeout, defaultTimeout),
		RetryCnt:    cmp.Or(p.RetryCnt, defaultRetryCnt),
		RNRRetry:    cmp.Or(p.RNRRetry, defaultRNRRetry),
		MaxRdAtomic: cmp.Or(p.MaxRdAtomic, defaultRdAtomic),
	}
	return q.Modify(&attr, q.transportMask(RTS, AttrState|AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic))
}

// ToError moves the QP to ERROR: outstanding and posted work completes with
// WR_FLUSH_ERR.
func (q *QP) ToError() error {
	attr := Attr{State: Error}
	return q.Modify(&attr, AttrState)
}
