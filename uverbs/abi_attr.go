package uverbs

// The two attribute structs the RDMA CM ABI carries as well as the verbs
// one: an address vector in its UD events and a QP's attributes in the
// response of INIT_QP_ATTR. Package ucma embeds them in its own commands
// and decodes them with Attr, so their layout has one owner, pinned to the
// header here.

// AHAttrABI is struct ib_uverbs_ah_attr as the kernel reads and writes it
// (its grh, struct ib_uverbs_global_route, flattened): the address vector
// of create_ah and of the RDMA CM's UD events. Its fields are the
// kernel's; Attr decodes them.
type AHAttrABI struct {
	dgid         [16]uint8
	flowLabel    uint32
	sgidIndex    uint8
	hopLimit     uint8
	trafficClass uint8
	grhReserved  uint8
	dlid         uint16
	sl           uint8
	srcPathBits  uint8
	staticRate   uint8
	isGlobal     uint8
	portNum      uint8
	reserved     uint8
}

// ahAttrABI lays a out as the kernel reads it.
func ahAttrABI(a AHAttr) AHAttrABI {
	return AHAttrABI{
		dgid:         a.GRH.DGID,
		flowLabel:    a.GRH.FlowLabel,
		sgidIndex:    a.GRH.SGIDIndex,
		hopLimit:     a.GRH.HopLimit,
		trafficClass: a.GRH.TrafficClass,
		dlid:         a.DLID,
		sl:           a.SL,
		srcPathBits:  a.SrcPathBits,
		staticRate:   a.StaticRate,
		isGlobal:     b2u8(a.IsGlobal),
		portNum:      a.PortNum,
	}
}

// Attr decodes the address vector.
func (a *AHAttrABI) Attr() AHAttr {
	return AHAttr{
		GRH: GlobalRoute{
			DGID:         a.dgid,
			FlowLabel:    a.flowLabel,
			SGIDIndex:    a.sgidIndex,
			HopLimit:     a.hopLimit,
			TrafficClass: a.trafficClass,
		},
		DLID:        a.dlid,
		SL:          a.sl,
		SrcPathBits: a.srcPathBits,
		StaticRate:  a.staticRate,
		IsGlobal:    a.isGlobal != 0,
		PortNum:     a.portNum,
	}
}

// QPAttrABI is struct ib_uverbs_qp_attr as the kernel writes it: the
// response of the RDMA CM's INIT_QP_ATTR, the attributes (and mask) that
// move a QP of a CM id to a state. Its fields are the kernel's; Attr
// decodes them.
type QPAttrABI struct {
	qpAttrMask       uint32
	qpState          uint32
	curQPState       uint32
	pathMTU          uint32
	pathMigState     uint32
	qkey             uint32
	rqPSN            uint32
	sqPSN            uint32
	destQPNum        uint32
	qpAccessFlags    uint32
	ahAttr           AHAttrABI
	altAHAttr        AHAttrABI
	maxSendWR        uint32
	maxRecvWR        uint32
	maxSendSGE       uint32
	maxRecvSGE       uint32
	maxInlineData    uint32
	pkeyIndex        uint16
	altPKeyIndex     uint16
	enSQDAsyncNotify uint8
	sqDraining       uint8
	maxRdAtomic      uint8
	maxDestRdAtomic  uint8
	minRNRTimer      uint8
	portNum          uint8
	timeout          uint8
	retryCnt         uint8
	rnrRetry         uint8
	altPortNum       uint8
	altTimeout       uint8
	reserved         [5]uint8
}

// Attr decodes the attributes and the mask saying which of them apply;
// bits beyond what MODIFY_QP takes are returned as the kernel gave them.
func (r *QPAttrABI) Attr() (QPAttr, QPAttrMask) {
	return QPAttr{
		State:            QPState(r.qpState),
		CurState:         QPState(r.curQPState),
		PathMTU:          MTU(r.pathMTU),
		PathMigState:     MigState(r.pathMigState),
		QKey:             r.qkey,
		RQPSN:            r.rqPSN,
		SQPSN:            r.sqPSN,
		DestQPNum:        r.destQPNum,
		AccessFlags:      Access(r.qpAccessFlags),
		Cap:              QPCap{r.maxSendWR, r.maxRecvWR, r.maxSendSGE, r.maxRecvSGE, r.maxInlineData},
		AH:               r.ahAttr.Attr(),
		AltAH:            r.altAHAttr.Attr(),
		PKeyIndex:        r.pkeyIndex,
		AltPKeyIndex:     r.altPKeyIndex,
		EnSQDAsyncNotify: r.enSQDAsyncNotify != 0,
		SQDraining:       r.sqDraining != 0,
		MaxRdAtomic:      r.maxRdAtomic,
		MaxDestRdAtomic:  r.maxDestRdAtomic,
		MinRNRTimer:      r.minRNRTimer,
		PortNum:          r.portNum,
		Timeout:          r.timeout,
		RetryCnt:         r.retryCnt,
		RNRRetry:         r.rnrRetry,
		AltPortNum:       r.altPortNum,
		AltTimeout:       r.altTimeout,
	}, QPAttrMask(r.qpAttrMask)
}
