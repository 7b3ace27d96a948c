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

// Listener is a CM id listening on an address and port (rdma_listen). Its
// event channel carries only its connection requests: each request's new
// id moves to a channel of its own (rdma_migrate_id) as it is taken.
type Listener struct {
	ch   *ucma.Channel
	id   uint32
	uid  uint64
	addr netip.AddrPort
	opts Options
	udp  bool
	// dev is the device the id is bound to, when known (devKnown), for
	// the error of its removal.
	dev      uverbs.Device
	devKnown bool

	// closing is cancelled by Close: it ends the accepts past their
	// request (waiting for ESTABLISHED) with ErrClosed.
	closing       context.Context
	cancelClosing context.CancelFunc

	mu      sync.Mutex
	closed  bool
	pending map[*Request]struct{} // taken, neither accepted nor rejected
}

// Listen binds to address ("ip:port"; an empty host or 0.0.0.0 listens on
// every RDMA device; port 0 picks one) and listens (rdma_create_id,
// rdma_bind_addr, rdma_listen) in the TCP port space, for RC connections.
// o applies to the connections Accept builds. It does not block; ctx is
// only checked.
func Listen(ctx context.Context, address string, o Options) (*Listener, error) {
	return listen(ctx, address, o, ucma.PortSpaceTCP, qp.RC)
}

func listen(ctx context.Context, address string, o Options, ps ucma.PortSpace, typ qp.Type) (_ *Listener, err error) {
	ap, err := parseAddr(ctx, address)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch, err := ucma.Open()
	if err != nil {
		return nil, err
	}
	l := &Listener{ch: ch, uid: newUID(), opts: o, udp: ps == ucma.PortSpaceUDP, pending: map[*Request]struct{}{}}
	l.closing, l.cancelClosing = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			l.cancelClosing()
			ch.Close() // destroys the id too
		}
	}()
	if l.id, err = ch.CreateID(l.uid, ps, uverbs.QPType(typ)); err != nil {
		return nil, err
	}
	if err := ch.Bind(l.id, ap); err != nil {
		return nil, wrapStep("listen", ap.String(), err)
	}
	// The bound id knows its device and port already; learning them
	// before listening means that once anyone can see the listener (a
	// peer's request, the kernel's CM ID table), a DEVICE_REMOVAL it gets
	// names the device.
	l.addr = ap
	if info, err := ch.QueryAddr(l.id); err == nil {
		if info.Src.IsValid() {
			l.addr = info.Src
		}
		l.dev, l.devKnown = deviceByGUID(info.NodeGUID)
	}
	if err := ch.Listen(l.id, o.Backlog); err != nil {
		return nil, wrapStep("listen", ap.String(), err)
	}
	return l, nil
}

// Addr is the address listened on, with the port the kernel picked for 0.
func (l *Listener) Addr() netip.AddrPort { return l.addr }

// Accept waits for the next connection request and accepts it with the
// Options given to Listen (Request, then Request.Accept). A request whose
// setup fails is rejected and Accept returns the error; the listener goes
// on listening.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	r, err := l.Request(ctx)
	if err != nil {
		return nil, err
	}
	return r.Accept(ctx, l.opts)
}

// Request waits for the next connection request (a CONNECT_REQUEST event)
// and returns it, its id already on an event channel of its own. The
// request must be accepted or rejected; the listener's Close rejects it
// otherwise. It returns ctx.Err() when ctx is done, ErrClosed once the
// listener is closed, and an *EventError (DEVICE_REMOVAL) when the device
// the listener is bound to goes away; that error also matches
// uverbs.ErrDeviceRemoved and names the device when it was known at
// Listen.
func (l *Listener) Request(ctx context.Context) (*Request, error) {
	for {
		ev, err := l.ch.WaitEvent(ctx)
		if err != nil {
			return nil, err
		}
		if ev.Type != ucma.EventConnectRequest {
			if ev.Type == ucma.EventDeviceRemoval {
				return nil, removalError(&EventError{Op: "listen", Addr: l.addr.String(), Event: EventType(ev.Type), Status: ev.Status}, l.dev, l.devKnown)
			}
			continue
		}
		r, err := l.take(&ev)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// take moves a request's new id to a channel of its own and learns where
// it came from. On failure the request is rejected.
func (l *Listener) take(ev *ucma.Event) (_ *Request, err error) {
	r := &Request{l: l, id: ev.ID, udp: l.udp}
	if l.udp {
		u := ev.UDParam()
		r.param = ucma.ConnParam{QPNum: u.QPNum, QKey: u.QKey, PrivateData: u.PrivateData}
	} else {
		r.param = ev.ConnParam()
	}
	r.ch, err = ucma.Open()
	if err != nil {
		l.ch.Reject(ev.ID, 0, nil)
		l.ch.DestroyID(ev.ID)
		return nil, err
	}
	if _, err := r.ch.MigrateID(ev.ID, l.ch); err != nil {
		l.ch.Reject(ev.ID, 0, nil)
		l.ch.DestroyID(ev.ID)
		r.ch.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			r.ch.Reject(r.id, 0, nil)
			r.ch.Close()
		}
	}()
	info, err := r.ch.QueryAddr(r.id)
	if err != nil {
		return nil, err
	}
	r.local, r.remote = info.Src, info.Dst
	if r.dev, err = devices.acquire(info.NodeGUID); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errors.Join(ErrClosed, devices.release(r.dev))
	}
	l.pending[r] = struct{}{}
	l.mu.Unlock()
	return r, nil
}

// Close stops listening. Requests queued and not yet taken, and requests
// taken but neither accepted nor rejected, are rejected (reason 28,
// consumer); established connections are not affected. A Request or
// Accept waiting returns ErrClosed, an Accept waiting for ESTABLISHED
// too (its request is rejected). Idempotent.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	l.cancelClosing()
	var errs []error
	// Refuse what is queued, explicitly, before the listener goes.
	for {
		ev, err := l.ch.ReadEvent()
		if err != nil {
			break
		}
		if ev.Type == ucma.EventConnectRequest {
			l.ch.Reject(ev.ID, 0, nil)
			l.ch.DestroyID(ev.ID)
		}
	}
	for r := range pending {
		errs = append(errs, r.reject(nil, false))
	}
	if _, err := l.ch.DestroyID(l.id); err != nil && !errors.Is(err, uverbs.ErrClosed) {
		errs = append(errs, err)
	}
	errs = append(errs, l.ch.Close())
	return errors.Join(errs...)
}

// forget drops a request that was accepted or rejected.
func (l *Listener) forget(r *Request) {
	l.mu.Lock()
	delete(l.pending, r)
	l.mu.Unlock()
}

// Request is a connection request taken from a Listener: who asks and with
// what, and the device it arrived on. Accept, AcceptQP or Reject it once.
type Request struct {
	l     *Listener
	ch    *ucma.Channel
	id    uint32
	udp   bool
	param ucma.ConnParam
	dev   *device

	local, remote netip.AddrPort

	mu   sync.Mutex
	done bool
}

// Param is the request's parameters as this side sees them: the
// requester's private data (over RoCE always MaxPrivateDataREQ bytes, the
// sender's data first), its QPN, and in ResponderResources and
// InitiatorDepth what it asks this side to grant and may grant in return.
// For a UD request, QPNum and QKey are the requester's.
func (r *Request) Param() ucma.ConnParam { return r.param }

// PrivateData is Param().PrivateData.
func (r *Request) PrivateData() []byte { return r.param.PrivateData }

// LocalAddr and RemoteAddr are the request's endpoints.
func (r *Request) LocalAddr() netip.AddrPort  { return r.local }
func (r *Request) RemoteAddr() netip.AddrPort { return r.remote }

// Context is the device context the request arrived on: build a QP for
// AcceptQP there. It stays open while the Request or its Conn lives; the
// Conn's Close may close it (the package shares one context per device and
// closes it with its last connection), destroying whatever is still open
// under it.
func (r *Request) Context() *uverbs.Context { return r.dev.ctx }

// claim marks the request answered; false if it was already.
func (r *Request) claim() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return false
	}
	r.done = true
	return true
}

// Reject refuses the request (rdma_reject) with private data (at most
// MaxPrivateDataREJ bytes over RoCE); the requester gets a *RejectError
// with reason RejectConsumer and the data.
func (r *Request) Reject(privateData []byte) error {
	if len(privateData) > MaxPrivateDataREJ {
		return fmt.Errorf("rdmacm: reject: %d bytes of private data, a REJ carries %d: %w", len(privateData), MaxPrivateDataREJ, unix.EINVAL)
	}
	return r.reject(privateData, true)
}

func (r *Request) reject(privateData []byte, forget bool) error {
	if !r.claim() {
		return ErrClosed
	}
	if forget {
		r.l.forget(r)
	}
	err := r.ch.Reject(r.id, 0, privateData)
	r.ch.DestroyID(r.id)
	r.ch.Close()
	return errors.Join(err, devices.release(r.dev))
}

// Accept builds a PD, CQ and QP on the request's device as o says, takes
// the QP to INIT (rdma_create_qp), runs o.Setup, then RTR and RTS with the
// CM's attributes and accepts (rdma_accept), and waits for ESTABLISHED
// (the requester's RTU). On failure the request is rejected (after the
// REP, the REJ cancels it), o.Teardown runs if Setup had succeeded, and
// everything built is released before Accept returns.
func (r *Request) Accept(ctx context.Context, o Options) (*Conn, error) {
	return r.accept(ctx, &o, nil)
}

// AcceptQP accepts with a QP the caller built on Context() (RC, in RESET or
// INIT; UD in RESET for a ListenUD listener, a SIDR reply, RTS after Close):
// it moves it through INIT, RTR and RTS with the CM's attributes
// and accepts. The Conn does not own q (nor its CQs and PD): its Close
// moves q to ERROR and disconnects. Close q, its CQs and PD after the
// Conn's Disconnect and before its Close (see Context). On failure the
// request is rejected, q is left in ERROR (still the caller's) and
// o.Teardown runs if Setup had succeeded.
func (r *Request) AcceptQP(ctx context.Context, q *qp.QP, o Options) (*Conn, error) {
	if q == nil {
		return nil, fmt.Errorf("rdmacm: accept: nil QP: %w", unix.EINVAL)
	}
	return r.accept(ctx, &o, q)
}

func (r *Request) accept(ctx context.Context, o *Options, q *qp.QP) (_ *Conn, err error) {
	addr := r.remote.String()
	if len(o.PrivateData) > MaxPrivateDataREP {
		r.reject(nil, true)
		return nil, fmt.Errorf("rdmacm: accept %s: %d bytes of private data, a REP carries %d: %w", addr, len(o.PrivateData), MaxPrivateDataREP, unix.EINVAL)
	}
	if !r.claim() {
		return nil, ErrClosed
	}
	r.l.forget(r)
	// The listener's Close ends the wait for ESTABLISHED too.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(r.l.closing, func() { cancel(ErrClosed) })()
	c := &Conn{ch: r.ch, id: r.id, hasID: true, uid: newUID(), udp: r.udp, dev: r.dev, devHeld: true, local: r.local, remote: r.remote, peer: r.param}
	typ := qp.RC
	if r.udp {
		typ = qp.UD
	}
	defer func() {
		if err != nil {
			if c.q != nil {
				c.q.ToError()
			}
			if !c.connected {
				c.ch.Reject(c.id, 0, nil)
			}
			// Once the REP is out, DESTROY_ID itself cancels the REP's
			// retries and sends the REJ. A REJECT first would leave the
			// REP retrying (the id in TIMEWAIT), and DESTROY_ID would
			// wait for its last retry: 69 s on 6.1.
			err = errors.Join(err, c.undoSetup(), c.release())
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if q != nil {
		c.q = q
	} else if err := c.build(o, typ); err != nil {
		return nil, err
	}
	if r.udp {
		if err := c.acceptUD(o); err != nil {
			return nil, err
		}
		return c, nil
	}
	if c.q.State() == qp.StateReset {
		if err := toStateFromCM(c.ch, c.id, c.q, qp.StateInit, nil); err != nil {
			return nil, err
		}
	}
	if err := c.setup(o, "accept"); err != nil {
		return nil, err
	}
	resp, init := r.depths(o)
	if err := toStateFromCM(c.ch, c.id, c.q, qp.StateInit, nil); err != nil {
		return nil, err
	}
	if err := toStateFromCM(c.ch, c.id, c.q, qp.StateRTR, func(a *qp.Attr) { a.MaxDestRdAtomic = resp }); err != nil {
		return nil, err
	}
	if err := toStateFromCM(c.ch, c.id, c.q, qp.StateRTS, func(a *qp.Attr) { a.MaxRdAtomic = init }); err != nil {
		return nil, err
	}
	p := c.connParam(o, resp, init)
	if err := c.ch.Accept(c.id, c.uid, &p, ucma.ECE{}); err != nil {
		return nil, wrapStep("accept", addr, err)
	}
	c.connected = true
	if _, err := c.awaitEvent(ctx, "accept", addr, ucma.EventEstablished); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrClosed) {
			return nil, wrapStep("accept", addr, fmt.Errorf("listener closed: %w", cause))
		}
		return nil, err
	}
	return c, nil
}

// depths are the responder resources and initiator depth to accept with:
// the options', or the request's capped by the device (rdma_accept's
// choice without parameters).
func (r *Request) depths(o *Options) (resp, init uint8) {
	resp, init = r.param.ResponderResources, r.param.InitiatorDepth
	if attr, err := r.dev.ctx.QueryDevice(); err == nil {
		resp = uint8(min(int(resp), attr.MaxQPRdAtom))
		init = uint8(min(int(init), attr.MaxQPInitRdAtom))
	}
	if o.ResponderResources != 0 {
		resp = o.ResponderResources
	}
	if o.InitiatorDepth != 0 {
		init = o.InitiatorDepth
	}
	return resp, init
}
