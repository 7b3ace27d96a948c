package uverbs

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// CQAttr describes a completion queue to create.
type CQAttr struct {
	CQE        int          // minimum number of entries; the device may round up
	Channel    *CompChannel // completion channel for events, or nil
	Vector     int          // completion vector, < Context.NumCompVectors
	UserHandle uint64       // returned by CompChannel.ReadEvent and async events for this CQ
}

// CQ is the kernel side of a completion queue. Polling it is the provider's
// business (the rxe ring), through the driver data CreateCQ returns.
type CQ struct {
	ctx        *Context
	handle     uint32
	cqe        int
	userHandle uint64
	channel    *CompChannel
	close      once
}

// CreateCQ creates a completion queue (IB_USER_VERBS_CMD_CREATE_CQ).
// driverOut receives the driver's response (for rdma_rxe a struct
// rxe_create_cq_resp with the ring's mmap offset and size); its length is
// what the driver expects, a multiple of 4 bytes.
func (c *Context) CreateCQ(attr CQAttr, driverOut []byte) (*CQ, error) {
	if attr.CQE <= 0 || attr.CQE > math.MaxInt32 || attr.Vector < 0 || attr.Vector > math.MaxInt32 {
		return nil, fmt.Errorf("uverbs: create_cq: cqe %d, vector %d: %w", attr.CQE, attr.Vector, unix.EINVAL)
	}
	var resp respFrame[createCQResp]
	var f writeFrame[createCQCmd]
	f.req = createCQCmd{
		Response:    resp.ptr(),
		UserHandle:  attr.UserHandle,
		CQE:         uint32(attr.CQE),
		CompVector:  uint32(attr.Vector),
		CompChannel: -1,
	}
	if attr.Channel != nil {
		f.req.CompChannel = int32(attr.Channel.fd)
	}
	if err := execWrite(c.fd, "create_cq", cmdCreateCQ, &f, &resp, nil, len(driverOut)); err != nil {
		return nil, err
	}
	copy(driverOut, resp.drv[:])
	return &CQ{ctx: c, handle: resp.resp.CQHandle, cqe: int(resp.resp.CQE), userHandle: attr.UserHandle, channel: attr.Channel}, nil
}

// Context returns the context of the CQ.
func (cq *CQ) Context() *Context { return cq.ctx }

// Handle returns the kernel handle of the CQ.
func (cq *CQ) Handle() uint32 { return cq.handle }

// CQE returns the number of entries the device granted.
func (cq *CQ) CQE() int { return cq.cqe }

// UserHandle returns the handle given at creation.
func (cq *CQ) UserHandle() uint64 { return cq.userHandle }

// Channel returns the completion channel of the CQ, or nil.
func (cq *CQ) Channel() *CompChannel { return cq.channel }

// ReqNotify arms the CQ (IB_USER_VERBS_CMD_REQ_NOTIFY_CQ): the next
// completion (only solicited ones if solicitedOnly) raises one event on the
// channel. A completion that arrived before arming raises none: poll again
// after arming. It allocates nothing.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	var f writeFrame[reqNotifyCQCmd]
	f.req = reqNotifyCQCmd{CQHandle: cq.handle}
	if solicitedOnly {
		f.req.SolicitedOnly = 1
	}
	return execHotWrite(cq.ctx.fd, "req_notify_cq", cmdReqNotifyCQ, &f, noResp)
}

// Destroy destroys the CQ (IB_USER_VERBS_CMD_DESTROY_CQ) and returns how
// many completion and async events the kernel reported for it, so that the
// caller can account for events it has not read or acknowledged yet.
// Destroy is idempotent: later calls return zero counts.
func (cq *CQ) Destroy() (compEvents, asyncEvents uint32, err error) {
	err = cq.close.do(func() error {
		if cq.ctx.released() {
			return nil
		}
		var resp respFrame[destroyCQResp]
		var f writeFrame[destroyCQCmd]
		f.req = destroyCQCmd{Response: resp.ptr(), CQHandle: cq.handle}
		if err := execWrite(cq.ctx.fd, "destroy_cq", cmdDestroyCQ, &f, &resp, nil, 0); err != nil {
			return err
		}
		compEvents, asyncEvents = resp.resp.CompEventsReported, resp.resp.AsyncEventsReported
		return nil
	})
	return compEvents, asyncEvents, err
}
