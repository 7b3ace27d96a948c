package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
	"github.com/pureverbs/pureverbs/uverbs"
)

// nextUID numbers the CM ids of the process; the kernel reports it with
// every event and drops the events of uid 0.
var nextUID atomic.Uint64

func newUID() uint64 { return nextUID.Add(1) }

// Conn is a connected queue pair and the CM id that connected it, on an
// event channel of its own. Its QP is in RTS. It owns what Dial or Accept
// built (PD, CQ, completion channel, QP; not a QP passed to AcceptQP) and
// a share of the device's uverbs.Context; Close releases all of it.
type Conn struct {
	ch    *ucma.Channel
	id    uint32
	hasID bool // id is the kernel's (ids start at 0)
	uid   uint64
	udp   bool // UDP port space (UD)

	dev     *device // kept after release: Context stays valid
	devHeld bool    // the hold on dev is not yet released
	pd      *uverbs.PD
	compCh  *cq.Channel
	cq      *cq.CQ
	q       *qp.QP
	own     bool // pd, compCh, cq and q were built here

	local, remote netip.AddrPort
	peer          ucma.ConnParam // from the CONNECT_REQUEST or CONNECT_RESPONSE
	ud            ucma.UDParam   // a dialled UD connection's remote QPN, Q_Key, path
	ah            *qp.AH         // towards ud's path
	qkey          uint32         // a UD QP's own Q_Key

	teardown func(*Conn) error // Options.Teardown, armed once Setup succeeded

	mu           sync.Mutex
	connected    bool // a DREQ is due on Close
	closed       bool
	disconnected bool
}

// QP is the connection's queue pair.
func (c *Conn) QP() *qp.QP { return c.q }

// CQ is the completion queue of the QP's sends and receives (nil for a QP
// passed to AcceptQP).
func (c *Conn) CQ() *cq.CQ { return c.cq }

// CompChannel is the CQ's completion channel (Options.CompChannel), or nil.
func (c *Conn) CompChannel() *cq.Channel { return c.compCh }

// PD is the protection domain the QP is in: register memory there.
func (c *Conn) PD() *uverbs.PD { return c.pd }

// Context is the device context the connection runs on; after Close it
// is closed unless another connection still holds the device.
func (c *Conn) Context() *uverbs.Context { return c.dev.ctx }

// LocalAddr and RemoteAddr are the connection's two IP endpoints as the CM
// resolved them.
func (c *Conn) LocalAddr() netip.AddrPort  { return c.local }
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// PeerParam returns the peer's connection parameters: its private data (the
// REQ's on the passive side, the REP's on the active side, full-size as
// the CM delivers it), QPN and depths.
func (c *Conn) PeerParam() ucma.ConnParam { return c.peer }

// PrivateData is the private data the peer sent (PeerParam().PrivateData).
func (c *Conn) PrivateData() []byte { return c.peer.PrivateData }

// Event is a CM event of an established connection: DISCONNECTED (the
// peer disconnected or died, or the connection timed out), DEVICE_REMOVAL,
// UNREACHABLE, TIMEWAIT_EXIT, ADDR_CHANGE.
type Event struct {
	Type   EventType
	Status int32
}

// WaitEvent returns the connection's next CM event, waiting for one. On
// DISCONNECTED, DEVICE_REMOVAL and UNREACHABLE it first moves the QP to
// ERROR, so that every outstanding work request completes flushed, and
// answers a DREQ; Close is then all that remains. It returns ctx.Err() when
// ctx is done and ErrClosed after Close.
func (c *Conn) WaitEvent(ctx context.Context) (Event, error) {
	ev, err := c.ch.WaitEvent(ctx)
	if err != nil {
		return Event{}, err
	}
	switch ev.Type {
	case ucma.EventDisconnected, ucma.EventDeviceRemoval, ucma.EventUnreachable:
		c.shutdown()
	}
	return Event{Type: EventType(ev.Type), Status: ev.Status}, nil
}

// Disconnect moves the QP to ERROR (flushing what is outstanding) and sends
// a DREQ (rdma_disconnect); the peer sees DISCONNECTED. Close disconnects
// too.
func (c *Conn) Disconnect() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.mu.Unlock()
	return c.shutdown()
}

// shutdown flushes the QP and disconnects once.
func (c *Conn) shutdown() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disconnected {
		return nil
	}
	c.disconnected = true
	var errs []error
	if c.q != nil && !c.udp {
		if err := c.q.ToError(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if c.connected {
		c.connected = false
		if err := c.ch.Disconnect(c.id); err != nil && !isEINVAL(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close disconnects (if still connected), destroys the CM id and its
// channel, then the QP, CQ, completion channel and PD it built, and lets go
// of the device context. Memory the caller registered on PD() must be
// deregistered first (the PD is busy otherwise). It never waits for the
// peer. Idempotent.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.shutdown()
	return errors.Join(err, c.release())
}

// setup runs o.Setup (op and the remote address name a failure) and, once
// it succeeded, arms o.Teardown for fail.
func (c *Conn) setup(o *Options, op string) error {
	if o.Setup == nil {
		return nil
	}
	if err := o.Setup(c); err != nil {
		return fmt.Errorf("rdmacm: %s %s: setup: %w", op, c.remote, err)
	}
	c.teardown = o.Teardown
	return nil
}

// undoSetup runs the armed Teardown, once.
func (c *Conn) undoSetup() error {
	f := c.teardown
	c.teardown = nil
	if f == nil {
		return nil
	}
	if err := f(c); err != nil {
		return fmt.Errorf("rdmacm: %s: teardown: %w", c.remote, err)
	}
	return nil
}

// fail ends a Dial or DialUD that failed with cause: the QP to ERROR (its
// posted work flushed) and the DREQ if one is due, Teardown if Setup had
// succeeded, then everything the connection holds. What fails on the way
// is joined to cause.
func (c *Conn) fail(cause error) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	errs := []error{cause, c.shutdown()}
	if c.udp && c.q != nil {
		errs = append(errs, c.q.ToError())
	}
	return errors.Join(append(errs, c.undoSetup(), c.release())...)
}

// release destroys what the connection holds; fields still nil (a
// connect that failed half way) are skipped.
func (c *Conn) release() error {
	errs := []error{c.releaseCM()}
	if c.ah != nil {
		errs = append(errs, c.ah.Close())
	}
	if c.own {
		if c.q != nil {
			errs = append(errs, c.q.Close())
		}
		if c.cq != nil {
			errs = append(errs, c.cq.Close())
		}
		if c.compCh != nil {
			errs = append(errs, c.compCh.Close())
		}
		if c.pd != nil {
			errs = append(errs, c.pd.Close())
		}
	}
	if c.devHeld {
		errs = append(errs, devices.release(c.dev))
		c.devHeld = false
	}
	return errors.Join(errs...)
}

// releaseCM destroys the CM id and its channel, once.
func (c *Conn) releaseCM() error {
	if c.ch == nil {
		return nil
	}
	var errs []error
	if c.hasID {
		if _, err := c.ch.DestroyID(c.id); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			errs = append(errs, err)
		}
		c.hasID = false
	}
	if err := c.ch.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func isEINVAL(err error) bool {
	var e *ucma.Error
	return errors.As(err, &e) && e.Errno == 22
}

// build creates the PD, CQ and QP of a connection on its device, in RESET.
func (c *Conn) build(o *Options, typ qp.Type) error {
	ctx := c.dev.ctx
	c.own = true
	var err error
	if c.pd, err = ctx.AllocPD(); err != nil {
		return err
	}
	if o.CompChannel {
		if c.compCh, err = cq.NewChannel(ctx); err != nil {
			return err
		}
	}
	capa := o.Cap
	if capa.MaxSendWR == 0 {
		capa.MaxSendWR = 128
	}
	if capa.MaxRecvWR == 0 {
		capa.MaxRecvWR = 128
	}
	cqe := o.CQE
	if cqe == 0 {
		cqe = int(capa.MaxSendWR + capa.MaxRecvWR)
	}
	if c.cq, err = cq.New(ctx, cqe, c.compCh); err != nil {
		return err
	}
	c.q, err = qp.New(c.pd, qp.Spec{Type: typ, SendCQ: c.cq, RecvCQ: c.cq, Cap: capa, SigAll: o.SigAll})
	return err
}

// modifyMask is every attribute bit MODIFY_QP takes; INIT_QP_ATTR may
// report more, which librdmacm masks off the same way for InfiniBand.
const modifyMask qp.AttrMask = 1<<21 - 1

// toStateFromCM moves q to state with the attributes the CM gives for it
// (rdma_init_qp_attr, then ibv_modify_qp); adjust, if set, changes them
// first.
func toStateFromCM(ch *ucma.Channel, id uint32, q *qp.QP, state qp.State, adjust func(*qp.Attr)) error {
	attr, mask, err := initQPAttr(ch, id, state)
	if err != nil {
		return err
	}
	if adjust != nil {
		adjust(&attr)
	}
	if err := q.Modify(&attr, mask&modifyMask); err != nil {
		return fmt.Errorf("rdmacm: QP to %v with the CM's attributes (mask %#x): %w", state, uint32(mask), err)
	}
	return nil
}

// initQPAttr is rdma_init_qp_attr in the qp package's terms.
func initQPAttr(ch *ucma.Channel, id uint32, state qp.State) (qp.Attr, qp.AttrMask, error) {
	v, mask, err := ch.InitQPAttr(id, uverbs.QPState(state))
	if err != nil {
		return qp.Attr{}, 0, err
	}
	return qp.AttrFromVerbs(&v), qp.AttrMask(mask), nil
}

// connParam is this side's connect or accept parameters.
func (c *Conn) connParam(o *Options, resp, init uint8) ucma.ConnParam {
	return ucma.ConnParam{
		QPNum:              c.q.Num(),
		PrivateData:        o.PrivateData,
		ResponderResources: resp,
		InitiatorDepth:     init,
		RetryCount:         o.retry(),
		RNRRetryCount:      o.rnr(),
	}
}

// awaitEvent waits on the connection's channel for want, skipping events
// that do not end the step (ADDR_CHANGE, an ESTABLISHED of no interest);
// REJECTED, UNREACHABLE, CONNECT_ERROR and the resolution errors end it
// with an error.
func (c *Conn) awaitEvent(ctx context.Context, op, addr string, want ...ucma.EventType) (ucma.Event, error) {
	for {
		ev, err := c.ch.WaitEvent(ctx)
		if err != nil {
			return ev, wrapStep(op, addr, err)
		}
		for _, w := range want {
			if ev.Type == w {
				if ev.Status != 0 && w != ucma.EventConnectRequest {
					return ev, &EventError{Op: op, Addr: addr, Event: EventType(ev.Type), Status: ev.Status}
				}
				return ev, nil
			}
		}
		switch ev.Type {
		case ucma.EventRejected:
			p := ev.ConnParam()
			return ev, &RejectError{Addr: addr, Reason: int(ev.Status), PrivateData: p.PrivateData}
		case ucma.EventAddrError, ucma.EventRouteError, ucma.EventUnreachable,
			ucma.EventConnectError, ucma.EventDeviceRemoval, ucma.EventDisconnected:
			return ev, &EventError{Op: op, Addr: addr, Event: EventType(ev.Type), Status: ev.Status}
		}
	}
}
