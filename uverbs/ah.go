package uverbs

import (
	"fmt"
	"sync"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// Write commands of address handles and multicast groups (enum
// ib_uverbs_write_cmds).
const (
	cmdCreateAH    = 5
	cmdDestroyAH   = 8
	cmdAttachMcast = 30
	cmdDetachMcast = 31
)

// createAHCmd is struct ib_uverbs_create_ah.
type createAHCmd struct {
	Response   ptr64
	UserHandle uint64
	PDHandle   uint32
	Reserved   uint32
	Attr       AHAttrABI
}

// createAHResp is struct ib_uverbs_create_ah_resp; the driver's response
// (for rdma_rxe struct rxe_create_ah_resp) follows it directly.
type createAHResp struct {
	AHHandle uint32
}

// destroyAHCmd is struct ib_uverbs_destroy_ah.
type destroyAHCmd struct {
	AHHandle uint32
}

// mcastCmd is struct ib_uverbs_attach_mcast, and struct
// ib_uverbs_detach_mcast, which has the same layout.
type mcastCmd struct {
	GID      [16]uint8
	QPHandle uint32
	MLID     uint16
	Reserved uint16
}

// AH is an address handle: the address vector a UD work request is sent
// along. It belongs to a PD; Close destroys it, and the Context's Close
// destroys it if the caller has not (before the PDs).
type AH struct {
	pd     *PD
	handle uint32
	attr   AHAttr
	kid    *child
	gate   gate
	watch  leakcheck.Watch
}

// GlobalAH is the address vector of a RoCE address handle towards dgid:
// every RoCE path is global, sent from the local GID sgidIndex with the
// given IP hop limit (TTL), on port 1.
func GlobalAH(dgid GID, sgidIndex, hopLimit uint8) AHAttr {
	return AHAttr{
		IsGlobal: true,
		PortNum:  1,
		GRH:      GlobalRoute{DGID: dgid, SGIDIndex: sgidIndex, HopLimit: hopLimit},
	}
}

// CreateAH creates an address handle (IB_USER_VERBS_CMD_CREATE_AH).
// driverOut receives the driver's response: for rdma_rxe an 8-byte struct
// rxe_create_ah_resp, whose presence makes the kernel hand out the AH
// number that work requests then carry instead of a whole address vector.
// A RoCE port needs attr.IsGlobal (see GlobalAH); a port number of 0 is
// taken as 1.
func (pd *PD) CreateAH(attr AHAttr, driverOut []byte) (*AH, error) {
	const verb = "create_ah"
	if attr.PortNum == 0 {
		attr.PortNum = 1
	}
	if !attr.IsGlobal {
		return nil, fmt.Errorf("uverbs: %s: RoCE address handles need a global route (IsGlobal, DGID): %w", verb, unix.EINVAL)
	}
	if !pd.gate.enter() {
		return nil, closedError(verb)
	}
	defer pd.gate.leave()
	c := pd.ctx
	var resp respFrame[createAHResp]
	var f writeFrame[createAHCmd]
	f.req = createAHCmd{
		Response: resp.ptr(),
		PDHandle: pd.handle,
		Attr:     ahAttrABI(attr),
	}
	if err := execWrite(c, verb, cmdCreateAH, &f, &resp, nil, len(driverOut)); err != nil {
		return nil, err
	}
	copy(driverOut, resp.drv[:])
	ah := &AH{pd: pd, handle: resp.resp.AHHandle, attr: attr}
	ah.kid = addChild(&c.kids, levelCQMR, ah, (*AH).Close)
	ah.watch = watchKernelObject(ah, "AH", ah.handle)
	return ah, nil
}

// PD returns the protection domain of the AH.
func (ah *AH) PD() *PD { return ah.pd }

// Handle returns the kernel handle of the AH.
func (ah *AH) Handle() uint32 { return ah.handle }

// Attr returns the address vector the AH was created with.
func (ah *AH) Attr() AHAttr { return ah.attr }

// Closed reports whether the AH was closed (by Close or its Context's), for
// a provider to refuse a work request addressed with it: the request would
// reach the kernel with a number that names nothing, or another AH.
func (ah *AH) Closed() bool { return ah.gate.closed() }

// Close destroys the address handle (IB_USER_VERBS_CMD_DESTROY_AH). Work
// requests already posted with it may fail. Once it has succeeded, Close
// does nothing; a failed destroy may be retried.
func (ah *AH) Close() error {
	return ah.gate.shut(func() error {
		c := ah.pd.ctx
		if !c.released() {
			var f writeFrame[destroyAHCmd]
			f.req = destroyAHCmd{AHHandle: ah.handle}
			if err := destroyed(c, execWrite(c, "destroy_ah", cmdDestroyAH, &f, noResp, nil, 0)); err != nil {
				return err
			}
		}
		ah.watch.Closed()
		c.kids.remove(ah.kid)
		return nil
	})
}

// AttachMcast joins the UD QP to the multicast group gid
// (IB_USER_VERBS_CMD_ATTACH_MCAST): datagrams sent to the group (QPN
// 0xffffff, the group's GID as destination) are delivered to it. lid is the
// group's LID, 0 on RoCE. On RoCE this makes no IGMP/MLD join: the netdev
// must accept the group's IP traffic by other means. The QP remembers the
// group: Destroy detaches it first, as the kernel refuses to destroy an
// attached QP.
func (qp *QP) AttachMcast(gid GID, lid uint16) error {
	return qp.mcast("attach_mcast", cmdAttachMcast, gid, lid)
}

// DetachMcast removes the QP from the multicast group gid
// (IB_USER_VERBS_CMD_DETACH_MCAST).
func (qp *QP) DetachMcast(gid GID, lid uint16) error {
	return qp.mcast("detach_mcast", cmdDetachMcast, gid, lid)
}

func (qp *QP) mcast(verb string, cmd uint32, gid GID, lid uint16) error {
	if !qp.gate.enter() {
		return closedError(verb)
	}
	defer qp.gate.leave()
	g := &qp.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := qp.mcastCmd(verb, cmd, gid, lid); err != nil {
		return err
	}
	if cmd == cmdAttachMcast {
		if g.set == nil {
			g.set = make(map[mcastGroup]struct{})
		}
		g.set[mcastGroup{gid, lid}] = struct{}{}
	} else {
		delete(g.set, mcastGroup{gid, lid})
	}
	return nil
}

func (qp *QP) mcastCmd(verb string, cmd uint32, gid GID, lid uint16) error {
	var f writeFrame[mcastCmd]
	f.req = mcastCmd{GID: gid, QPHandle: qp.handle, MLID: lid}
	return execWrite(qp.pd.ctx, verb, cmd, &f, noResp, nil, 0)
}

// mcastGroup is one multicast group a QP is attached to.
type mcastGroup struct {
	gid GID
	lid uint16
}

// mcastGroups are the groups a QP is attached to. uverbs refuses (EBUSY)
// to destroy a QP that is still attached to a group, so Destroy detaches
// them first.
type mcastGroups struct {
	mu  sync.Mutex
	set map[mcastGroup]struct{}
}

// detachAll detaches the QP from every group it is attached to; a group
// whose detach fails stays recorded, and the first error is returned.
func (qp *QP) detachAll() error {
	g := &qp.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	for m := range g.set {
		if err := qp.mcastCmd("detach_mcast", cmdDetachMcast, m.gid, m.lid); err != nil {
			return err
		}
		delete(g.set, m)
	}
	return nil
}
