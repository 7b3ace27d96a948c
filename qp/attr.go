package qp

import "github.com/pureverbs/pureverbs/uverbs"

// Attr holds the attributes of a queue pair that Modify sets and Query
// reports (struct ibv_qp_attr); an AttrMask says which are meaningful. The
// transition helpers (ToInit, ToRTR, ToRTS, Connect, ActivateUD) fill it
// for the usual cases.
type Attr struct {
	State        State // the state to move to (AttrState)
	CurState     State // the state the caller believes the QP is in (AttrCurState)
	PathMTU      uverbs.MTU
	PathMigState uverbs.MigState
	QKey         uint32 // UD: the Q_Key datagrams must carry
	RQPSN        uint32 // the peer's initial send PSN (24 bits)
	SQPSN        uint32 // this side's initial send PSN (24 bits)
	DestQPNum    uint32 // the peer's QP number (RC, UC)
	// AccessFlags is what the peer may do to this side's memory through the
	// QP (uverbs.AccessRemoteWrite, ...).
	AccessFlags uverbs.Access
	// Cap is the QP's capacity (Query only: the kernel's view).
	Cap Cap
	// AH is the path to the peer (RC, UC); on RoCE it must be global.
	AH               uverbs.AHAttr
	AltAH            uverbs.AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool  // Query: the send queue is draining
	MaxRdAtomic      uint8 // RDMA READs and atomics outstanding from here
	MaxDestRdAtomic  uint8 // ... and from the peer at this side
	MinRNRTimer      uint8 // RNR NAK delay code
	PortNum          uint8
	Timeout          uint8 // ACK timeout code: 4.096 µs * 2^Timeout
	RetryCnt         uint8 // transport retries
	RNRRetry         uint8 // RNR retries; 7 is forever
	AltPortNum       uint8
	AltTimeout       uint8
}

// AttrMask selects Attr fields for Modify (enum ib_qp_attr_mask).
type AttrMask uint32

// Attribute mask bits.
const (
	AttrState            = AttrMask(uverbs.QPAttrState)
	AttrCurState         = AttrMask(uverbs.QPAttrCurState)
	AttrEnSQDAsyncNotify = AttrMask(uverbs.QPAttrEnSQDAsyncNotify)
	AttrAccessFlags      = AttrMask(uverbs.QPAttrAccessFlags)
	AttrPKeyIndex        = AttrMask(uverbs.QPAttrPKeyIndex)
	AttrPort             = AttrMask(uverbs.QPAttrPort)
	AttrQKey             = AttrMask(uverbs.QPAttrQKey)
	AttrAV               = AttrMask(uverbs.QPAttrAV)
	AttrPathMTU          = AttrMask(uverbs.QPAttrPathMTU)
	AttrTimeout          = AttrMask(uverbs.QPAttrTimeout)
	AttrRetryCnt         = AttrMask(uverbs.QPAttrRetryCnt)
	AttrRNRRetry         = AttrMask(uverbs.QPAttrRNRRetry)
	AttrRQPSN            = AttrMask(uverbs.QPAttrRQPSN)
	AttrMaxQPRdAtomic    = AttrMask(uverbs.QPAttrMaxQPRdAtomic)
	AttrAltPath          = AttrMask(uverbs.QPAttrAltPath)
	AttrMinRNRTimer      = AttrMask(uverbs.QPAttrMinRNRTimer)
	AttrSQPSN            = AttrMask(uverbs.QPAttrSQPSN)
	AttrMaxDestRdAtomic  = AttrMask(uverbs.QPAttrMaxDestRdAtomic)
	AttrPathMigState     = AttrMask(uverbs.QPAttrPathMigState)
	AttrCap              = AttrMask(uverbs.QPAttrCap)
	AttrDestQPN          = AttrMask(uverbs.QPAttrDestQPN)
)

// verbs is a as the kernel-object layer takes it.
func (a *Attr) verbs() uverbs.QPAttr {
	return uverbs.QPAttr{
		State: uverbs.QPState(a.State), CurState: uverbs.QPState(a.CurState),
		PathMTU: a.PathMTU, PathMigState: a.PathMigState,
		QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPNum: a.DestQPNum,
		AccessFlags: a.AccessFlags, Cap: uverbs.QPCap(a.Cap),
		AH: a.AH, AltAH: a.AltAH, PKeyIndex: a.PKeyIndex, AltPKeyIndex: a.AltPKeyIndex,
		EnSQDAsyncNotify: a.EnSQDAsyncNotify, SQDraining: a.SQDraining,
		MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer,
		PortNum: a.PortNum, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry,
		AltPortNum: a.AltPortNum, AltTimeout: a.AltTimeout,
	}
}

// AttrFromVerbs converts attributes in the kernel-object layer's terms
// to an Attr: those QP.Verbs().Query reports, or those the RDMA CM gives
// for a transition (ucma.Channel.InitQPAttr).
func AttrFromVerbs(v *uverbs.QPAttr) Attr {
	return Attr{
		State: State(v.State), CurState: State(v.CurState),
		PathMTU: v.PathMTU, PathMigState: v.PathMigState,
		QKey: v.QKey, RQPSN: v.RQPSN, SQPSN: v.SQPSN, DestQPNum: v.DestQPNum,
		AccessFlags: v.AccessFlags, Cap: Cap(v.Cap),
		AH: v.AH, AltAH: v.AltAH, PKeyIndex: v.PKeyIndex, AltPKeyIndex: v.AltPKeyIndex,
		EnSQDAsyncNotify: v.EnSQDAsyncNotify, SQDraining: v.SQDraining,
		MaxRdAtomic: v.MaxRdAtomic, MaxDestRdAtomic: v.MaxDestRdAtomic, MinRNRTimer: v.MinRNRTimer,
		PortNum: v.PortNum, Timeout: v.Timeout, RetryCnt: v.RetryCnt, RNRRetry: v.RNRRetry,
		AltPortNum: v.AltPortNum, AltTimeout: v.AltTimeout,
	}
}
