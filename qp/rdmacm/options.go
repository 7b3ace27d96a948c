package rdmacm

import (
	"cmp"
	"net/netip"
	"time"

	"github.com/pureverbs/pureverbs/qp"
)

// Options are the choices of Dial, Listen and Accept. The zero value
// connects like librdmacm with no connection parameters, except RetryCount.
type Options struct {
	// Source is the local address Dial resolves from (rdma_resolve_addr's
	// src): it picks the device and the GID. Invalid (the zero Addr) lets
	// the routing table choose; on a host whose devices share a subnet, set
	// it, or both ends may land on one device.
	Source netip.Addr
	// PrivateData travels in the REQ (Dial, at most MaxPrivateDataREQ
	// bytes over RoCE) or the REP (Accept, at most MaxPrivateDataREP).
	PrivateData []byte
	// ResolveTimeout bounds each of address and route resolution; 0 means
	// 2 s (rping's and perftest's choice). The context bounds the whole.
	ResolveTimeout time.Duration
	// Cap sizes the QP Dial and Accept build; zero fields take qp.New's
	// defaults (128 work requests, 1 SGE per queue).
	Cap qp.Cap
	// CQE sizes its CQ (one for sends and receives); 0 means the sum of the
	// two queues' work requests as granted.
	CQE int
	// CompChannel attaches the CQ to a completion channel of its own
	// (Conn.CompChannel), for callers who wait for completions.
	CompChannel bool
	// SigAll makes every send signal a completion.
	SigAll bool
	// ResponderResources is how many RDMA READs and atomics the peer may
	// have in flight towards this side; InitiatorDepth how many this side
	// may have towards the peer. 0 means 1 for Dial, and the request's
	// values capped by the device for Accept (what rdma_accept does).
	ResponderResources uint8
	InitiatorDepth     uint8
	// RetryCount is the transport retry count sent to the peer (0..7); 0
	// means 6. rxe takes 7 as "retry forever", so a dead peer would hang
	// the QP; choose 7 deliberately.
	RetryCount uint8
	// RNRRetryCount is the RNR retry count (0..7); 0 means 7 (retry for
	// ever, the receiver's posting is the flow control).
	RNRRetryCount uint8
	// Backlog is Listen's backlog: how many connection requests the
	// kernel holds that Request has not read. A REQ beyond it is dropped
	// without a REJ, and the requester's CM sends it again after its
	// timeout, about 6 s over RoCE on Linux 6.1 and 5 s on 6.12, until
	// there is room or its retries run out (TestCMListenBacklog). 0
	// means the kernel's maximum (net.rdma_ucm.max_backlog, 1024 by
	// default).
	Backlog int
	// Setup, if set, runs when the connection's QP is in INIT and nothing
	// has been sent: register memory, post the first receives. An error
	// aborts the connect (Dial) or rejects the request (Accept); a Setup
	// that fails releases what it built itself. What Setup built stays
	// the caller's: after a successful connect, release it before
	// Conn.Close (an MR keeps the PD busy).
	Setup func(*Conn) error
	// Teardown, if set, undoes Setup when the connect fails after Setup
	// returned nil (a rejection, a deadline, ctx cancelled): it runs once,
	// with the QP processing nothing (in ERROR, its posted work flushed;
	// a ConnectQP QP refused before its RTR may still be in INIT), before
	// the QP, CQ and PD are destroyed, so that the MRs Setup registered
	// can be deregistered first; the caller never sees this Conn. It
	// never runs after a successful connect, nor when Setup failed. Its
	// error is joined to the connect's.
	Teardown func(*Conn) error
}

// Private data limits of the CM messages over RoCE and InfiniBand (the
// message's private data field minus the 36-byte CM header in a REQ).
const (
	MaxPrivateDataREQ = 56
	MaxPrivateDataREP = 196
	MaxPrivateDataREJ = 148
	// MaxPrivateDataSIDRREQ is the limit of a UD (SIDR) request.
	MaxPrivateDataSIDRREQ = 180
)

// IB CM reject reasons a RejectError may carry (enum ib_cm_rej_reason).
const (
	// RejectNoListener: nobody listens on the port (the remote CM's
	// IB_CM_REJ_INVALID_SERVICE_ID).
	RejectNoListener = 8
	// RejectStaleConn: the remote CM still holds a connection of this QP.
	RejectStaleConn = 10
	// RejectConsumer: the listening application rejected the request
	// (rdma_reject; IB_CM_REJ_CONSUMER_DEFINED).
	RejectConsumer = 28
)

const defaultResolveTimeout = 2 * time.Second

func (o *Options) resolveTimeout() time.Duration {
	return cmp.Or(o.ResolveTimeout, defaultResolveTimeout)
}

func (o *Options) retry() uint8 { return cmp.Or(o.RetryCount, 6) }
func (o *Options) rnr() uint8   { return cmp.Or(o.RNRRetryCount, 7) }
