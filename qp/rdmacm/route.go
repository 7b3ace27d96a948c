package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Route is the active side's two-phase dial for callers who build their
// own queue pair, the counterpart of Listener.Request and
// Request.AcceptQP: Resolve finds the device that reaches the address, the
// caller builds a QP on Route.Context(), and ConnectQP connects it. Several
// Routes to one device share one Context, so their QPs may share a PD and
// CQs.
type Route struct {
	c   *Conn           // resolved id and device hold; its QP is the caller's once set
	ctx *uverbs.Context // c's device context, kept for Context after c released it

	mu   sync.Mutex
	used bool // ConnectQP was called
	done bool // the id and the device hold are gone (Close)
}

// Resolve creates a CM id on an event channel of its own and resolves
// address ("ip:port", RDMA CM's TCP port space) and the route to it
// (rdma_create_id, rdma_resolve_addr from o.Source, rdma_resolve_route),
// honouring ctx and o.ResolveTimeout. More than MaxPrivateDataREQ bytes of
// o.PrivateData are refused here (EINVAL). The Route holds the device
// context until ConnectQP hands it to the Conn, or Close.
func Resolve(ctx context.Context, address string, o Options) (*Route, error) {
	return resolveRoute(ctx, address, &o, ucma.PortSpaceTCP, qp.RC)
}

// ResolveUD is Resolve in RDMA CM's UDP port space (as for DialUD): the
// Route's ConnectQP then takes a UD QP and sends a SIDR request, at most
// MaxPrivateDataSIDRREQ bytes of o.PrivateData.
func ResolveUD(ctx context.Context, address string, o Options) (*Route, error) {
	return resolveRoute(ctx, address, &o, ucma.PortSpaceUDP, qp.UD)
}

func resolveRoute(ctx context.Context, address string, o *Options, ps ucma.PortSpace, typ qp.Type) (*Route, error) {
	dst, err := parseAddr(ctx, address)
	if err != nil {
		return nil, err
	}
	c, err := resolveID(ctx, dst, o, ps, typ)
	if err != nil {
		return nil, err
	}
	return &Route{c: c, ctx: c.dev.ctx}, nil
}

// Context is the device context the route leaves from: build the QP (and
// its PD and CQs) for ConnectQP there. It stays open while the Route or
// the Conn it became lives; the last of those to close may close it, and
// with it whatever is still open under it (see Request.Context). After
// that it is a closed Context, whose methods return ErrClosed.
func (r *Route) Context() *uverbs.Context { return r.ctx }

// LocalAddr and RemoteAddr are the route's endpoints as the CM resolved
// them (the local port is assigned by the connect).
func (r *Route) LocalAddr() netip.AddrPort  { return r.c.local }
func (r *Route) RemoteAddr() netip.AddrPort { return r.c.remote }

// ConnectQP connects q, an RC QP the caller built on Context() in RESET or
// INIT, with librdmacm's transitions for a caller's QP: INIT with the
// CM's attributes (rdma_init_qp_attr; skipped for a QP already in INIT),
// o.Setup, rdma_connect with q's number, and on CONNECT_RESPONSE INIT
// again (the access the CM grants), RTR and RTS from rdma_init_qp_attr,
// then the RTU (rdma_establish). o's Source, ResolveTimeout, Cap, CQE,
// CompChannel, SigAll and Backlog do not apply; its PrivateData,
// ResponderResources (0: 1), InitiatorDepth (0: 1), RetryCount, RNRRetryCount
// and Setup do. Conn.PD and Conn.CQ are nil: the Conn does not own q nor
// its CQs and PD. Its Close moves q to ERROR and disconnects; close q, its
// CQs and PD after Conn.Disconnect and before Conn.Close.
//
// On a ResolveUD route q is a UD QP in RESET, and ConnectQP is DialUD's
// connect: INIT with the CM's attributes, RTR, RTS, o.Setup, the SIDR
// request with q's number; Conn.Remote gives the peer's QPN and Q_Key and
// an address handle the Conn owns, made in q.PD(): close the Conn before
// that PD.
//
// A Route connects once: a second ConnectQP returns ErrClosed. On failure
// (a rejection, ctx done) o.Teardown runs if Setup had succeeded, q is
// left in INIT or ERROR (a UD QP in ERROR), the CM id is destroyed, and
// the Route still holds the device context: close q and what it built,
// then Route.Close.
func (r *Route) ConnectQP(ctx context.Context, q *qp.QP, o Options) (*Conn, error) {
	if q == nil {
		return nil, fmt.Errorf("rdmacm: connect: nil QP: %w", unix.EINVAL)
	}
	if ud := q.Type() == qp.UD; ud != r.c.udp {
		return nil, fmt.Errorf("rdmacm: connect %s: a %v QP on a route of the other port space (Resolve for RC, ResolveUD for UD): %w", r.c.remote, q.Type(), unix.EINVAL)
	}
	if maxData := privateDataLimit(r.c.udp); len(o.PrivateData) > maxData {
		return nil, fmt.Errorf("rdmacm: connect %s: %d bytes of private data, a REQ carries %d: %w", r.c.remote, len(o.PrivateData), maxData, unix.EINVAL)
	}
	r.mu.Lock()
	if r.used || r.done {
		r.mu.Unlock()
		return nil, fmt.Errorf("rdmacm: connect %s: the route was used or closed: %w", r.c.remote, ErrClosed)
	}
	r.used = true
	r.mu.Unlock()
	c := r.c
	c.q = q
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("rdmacm: connect %s: %w", r.c.remote, err), c.releaseCM())
	}
	connect := c.connectRC
	if c.udp {
		connect = c.connectUD
	}
	if err := connect(ctx, &o); err != nil {
		var qerr error
		if c.udp {
			// Teardown finds it processing nothing, as a failed RC
			// connect leaves it.
			qerr = q.ToError()
		}
		return nil, errors.Join(err, qerr, c.undoSetup(), c.releaseCM())
	}
	r.mu.Lock()
	r.done = true // the Conn holds the device now
	r.mu.Unlock()
	return c, nil
}

// Close gives up a Route that did not connect: it destroys the CM id and
// its channel (if ConnectQP has not) and lets go of the device context.
// After a successful ConnectQP it does nothing: the Conn owns all of it.
// It must not run while ConnectQP does (cancel its ctx instead).
// Idempotent.
func (r *Route) Close() error {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return nil
	}
	r.done = true
	r.mu.Unlock()
	return r.c.release()
}
