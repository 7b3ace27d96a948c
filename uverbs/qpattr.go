package uverbs

import "fmt"

// QPType is enum ib_uverbs_qp_type.
type QPType uint8

// QP types.
const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

// String is the transport's short name (RC, UC, UD).
func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPState is enum ib_qp_state.
type QPState uint8

// QP states.
const (
	QPStateReset QPState = 0
	QPStateInit  QPState = 1
	QPStateRTR   QPState = 2
	QPStateRTS   QPState = 3
	QPStateSQD   QPState = 4
	QPStateSQE   QPState = 5
	QPStateError QPState = 6
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String is the state as enum ibv_qp_state names it, without IBV_QPS_.
func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// MigState is enum ib_mig_state.
type MigState uint8

// Path migration states.
const (
	MigMigrated MigState = 0
	MigRearm    MigState = 1
	MigArmed    MigState = 2
)

// QPAttrMask selects the QPAttr fields a Modify or Query uses (enum
// ib_qp_attr_mask).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20

	// qpAttrAll is every bit the legacy MODIFY_QP/QUERY_QP accept.
	qpAttrAll QPAttrMask = 1<<21 - 1
)

// GlobalRoute is the GRH part of an address vector. RoCE needs it on every
// connected QP (AHAttr.IsGlobal).
type GlobalRoute struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (struct ib_uverbs_qp_dest).
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	PortNum     uint8
}

// QPCap is the capacity of a QP's work queues.
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPAttr holds the modifiable attributes of a QP; a QPAttrMask says which
// are meaningful.
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          MTU
	PathMigState     MigState
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	AccessFlags      Access
	Cap              QPCap
	AH               AHAttr
	AltAH            AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func destFrom(a *AHAttr) qpDest {
	return qpDest{
		DGID:         a.GRH.DGID,
		FlowLabel:    a.GRH.FlowLabel,
		DLID:         a.DLID,
		SGIDIndex:    a.GRH.SGIDIndex,
		HopLimit:     a.GRH.HopLimit,
		TrafficClass: a.GRH.TrafficClass,
		SL:           a.SL,
		SrcPathBits:  a.SrcPathBits,
		StaticRate:   a.StaticRate,
		IsGlobal:     b2u8(a.IsGlobal),
		PortNum:      a.PortNum,
	}
}

func ahFrom(d *qpDest) AHAttr {
	return AHAttr{
		GRH: GlobalRoute{
			DGID:         d.DGID,
			FlowLabel:    d.FlowLabel,
			SGIDIndex:    d.SGIDIndex,
			HopLimit:     d.HopLimit,
			TrafficClass: d.TrafficClass,
		},
		DLID:        d.DLID,
		SL:          d.SL,
		SrcPathBits: d.SrcPathBits,
		StaticRate:  d.StaticRate,
		IsGlobal:    d.IsGlobal != 0,
		PortNum:     d.PortNum,
	}
}

// modifyQPFrom encodes attr/mask as struct ib_uverbs_modify_qp. Like
// libibverbs it copies every field and lets the mask tell the kernel which
// to use.
func modifyQPFrom(handle uint32, attr *QPAttr, mask QPAttrMask) modifyQPCmd {
	return modifyQPCmd{
		Dest:             destFrom(&attr.AH),
		AltDest:          destFrom(&attr.AltAH),
		QPHandle:         handle,
		AttrMask:         uint32(mask),
		QKey:             attr.QKey,
		RQPSN:            attr.RQPSN,
		SQPSN:            attr.SQPSN,
		DestQPNum:        attr.DestQPNum,
		QPAccessFlags:    uint32(attr.AccessFlags),
		PKeyIndex:        attr.PKeyIndex,
		AltPKeyIndex:     attr.AltPKeyIndex,
		QPState:          uint8(attr.State),
		CurQPState:       uint8(attr.CurState),
		PathMTU:          uint8(attr.PathMTU),
		PathMigState:     uint8(attr.PathMigState),
		EnSQDAsyncNotify: b2u8(attr.EnSQDAsyncNotify),
		MaxRdAtomic:      attr.MaxRdAtomic,
		MaxDestRdAtomic:  attr.MaxDestRdAtomic,
		MinRNRTimer:      attr.MinRNRTimer,
		PortNum:          attr.PortNum,
		Timeout:          attr.Timeout,
		RetryCnt:         attr.RetryCnt,
		RNRRetry:         attr.RNRRetry,
		AltPortNum:       attr.AltPortNum,
		AltTimeout:       attr.AltTimeout,
	}
}

func qpAttrFrom(r *queryQPResp) QPAttr {
	return QPAttr{
		State:           QPState(r.QPState),
		CurState:        QPState(r.CurQPState),
		PathMTU:         MTU(r.PathMTU),
		PathMigState:    MigState(r.PathMigState),
		QKey:            r.QKey,
		RQPSN:           r.RQPSN,
		SQPSN:           r.SQPSN,
		DestQPNum:       r.DestQPNum,
		AccessFlags:     Access(r.QPAccessFlags),
		Cap:             QPCap{r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData},
		AH:              ahFrom(&r.Dest),
		AltAH:           ahFrom(&r.AltDest),
		PKeyIndex:       r.PKeyIndex,
		AltPKeyIndex:    r.AltPKeyIndex,
		SQDraining:      r.SQDraining != 0,
		MaxRdAtomic:     r.MaxRdAtomic,
		MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer:     r.MinRNRTimer,
		PortNum:         r.PortNum,
		Timeout:         r.Timeout,
		RetryCnt:        r.RetryCnt,
		RNRRetry:        r.RNRRetry,
		AltPortNum:      r.AltPortNum,
		AltTimeout:      r.AltTimeout,
	}
}
