package server

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/qp/rdmacm"
)

// RDMA CM defaults.
const (
	// DefaultMaxCMAccepts is how many RDMA CM accepts ServeCM runs at once
	// by default.
	DefaultMaxCMAccepts = 8
	// DefaultCMAcceptTimeout bounds one accept by default: long enough
	// for one lost REP to be sent again (librdmacm's requesters wait
	// about 4.3 s for it), short against the REP's 69 s of retries.
	DefaultCMAcceptTimeout = 10 * time.Second
)

// CMOptions tune ServeCM.
type CMOptions struct {
	// MaxAccepts is how many requests may be between their arrival and
	// ESTABLISHED at once. A request beyond it evicts the oldest accept
	// not yet ESTABLISHED (Stats.CMEvicted), or, if every one is, is
	// rejected at once (Stats.CMRefused): requesters that never send
	// their RTU cannot lock a sender out until their Timeout. 0 means
	// DefaultMaxCMAccepts.
	MaxAccepts int
	// Timeout bounds one accept, from its request to ESTABLISHED; an
	// accept not established by then is rejected (Stats.CMFailures). 0
	// means DefaultCMAcceptTimeout.
	Timeout time.Duration
	// AllowedSenders, when not empty, is the allow-list, as the side
	// channel's (ServeOptions.AllowedSenders): a request from an address
	// in none of the prefixes is rejected before a QP is built
	// (Stats.CMRefused).
	AllowedSenders []netip.Prefix
	// Logf, when set, reports each CM sender's arrival and departure and
	// every failed accept, and refused requests now and then.
	Logf func(format string, args ...any)
}

// CMAddr is the IPv4 address of the server's GID (an IPv4-mapped RoCE v2
// GID), the address to listen for RDMA CM connects on so that they arrive
// on the server's device; false for a GID that maps no IPv4 address.
func (s *Server) CMAddr() (netip.Addr, bool) {
	a := netip.AddrFrom16(s.dev.gid)
	if !a.Is4In6() {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// ServeCM accepts RDMA CM connects on l (rdmacm.Listen in the TCP port
// space, on the server's address: see CMAddr) as a second way in beside
// Serve's side channel; both may run at once. A request needs no private
// data: librdmacm's defaults (retry 6, RNR retry 7, one responder
// resource) connect.
//
// Each request gets a QP of its own on the server's PD, CQ channel and
// slab, accepted in two phases (Listener.Request, Request.AcceptQP). When
// no sender is running, every slot is posted on the new QP before the
// accept. When one is, the new sender replaces it only once its
// connection is ESTABLISHED: then the running connection is drained as
// the side channel does (its QP to ERROR, every completion that arrived
// before handled, its CM connection disconnected) and every slot is
// posted on the new QP; until then the new sender gets RNR NAKs and loses
// nothing. A CM sender that disconnects (DISCONNECTED, or its QP
// flushed) ends its connection; the slots wait for the next sender.
// Accepts run concurrently, at most MaxAccepts at once, each within
// Timeout (see CMOptions).
//
// ServeCM returns when ctx is done (ctx.Err()), the server is closed
// (ErrClosed) or l fails; it closes l, cancels the accepts in progress
// (their requesters get a REJ) and waits for them to end. The running CM
// connection, if any, stays (and so does the goroutine watching its
// events) until it ends or the server closes.
func (s *Server) ServeCM(ctx context.Context, l *rdmacm.Listener, opts CMOptions) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		l.Close()
		return ErrClosed
	case s.completed || s.servingCM:
		s.mu.Unlock()
		l.Close()
		return ErrConnected
	}
	s.servingCM = true
	s.ways.Add(1)
	defer s.ways.Done()
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if s.logf == nil {
		s.logf = opts.Logf
	}
	s.mu.Unlock()
	if opts.MaxAccepts <= 0 {
		opts.MaxAccepts = DefaultMaxCMAccepts
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultCMAcceptTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, func() { l.Close() })
	s.closeOnStop(ctx, l)
	a := &cmAccepts{s: s, opts: &opts, slots: make(chan struct{}, opts.MaxAccepts), running: map[*cmAccept]struct{}{}}
	defer func() {
		// Cancel before waiting: an accept waiting for an RTU would
		// otherwise hold ServeCM's return until its Timeout.
		cancel()
		stop()
		l.Close()
		a.wg.Wait()
	}()
	for {
		req, err := l.Request(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if s.stopped() {
				return ErrClosed
			}
			return fmt.Errorf("server: RDMA CM request: %w", err)
		}
		if !allowedAddr(opts.AllowedSenders, req.RemoteAddr().Addr()) {
			a.refuse(req, "not on the allow-list")
			continue
		}
		select {
		case a.slots <- struct{}{}:
		default:
			if !a.evict(ctx) {
				a.refuse(req, fmt.Sprintf("%d accepts running, none of them evictable", opts.MaxAccepts))
				continue
			}
		}
		a.start(ctx, req)
	}
}

// cmAccepts is one ServeCM's accepts in progress.
type cmAccepts struct {
	s     *Server
	opts  *CMOptions
	slots chan struct{} // one per running accept
	wg    sync.WaitGroup

	mu      sync.Mutex
	running map[*cmAccept]struct{}
}

// cmAccept is one accept in progress.
type cmAccept struct {
	since       time.Time
	cancel      context.CancelFunc
	established atomic.Bool // its RTU arrived: not evictable
	evicted     atomic.Bool
}

// start runs the accept of req, which holds a slot, in a goroutine of
// its own, within Timeout.
func (a *cmAccepts) start(ctx context.Context, req *rdmacm.Request) {
	actx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	x := &cmAccept{since: time.Now(), cancel: cancel}
	a.mu.Lock()
	a.running[x] = struct{}{}
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		ss, c, err := a.s.acceptCM(actx, req, func() { x.established.Store(true) })
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		a.mu.Lock()
		delete(a.running, x)
		a.mu.Unlock()
		<-a.slots
		// An accept is logged before CMConnects or CMFailures counts it,
		// so whoever sees the count in Stats finds the line in the log.
		logf := a.opts.Logf
		if err != nil {
			switch {
			case x.evicted.Load():
				if n := a.s.c.cmEvicted.Add(1); n&(n-1) == 0 {
					logf("rdma cm: evicted %v, not established after %v, to make room (%d evicted so far)", req.RemoteAddr(), time.Since(x.since).Round(time.Millisecond), n)
				}
			case timedOut:
				logf("rdma cm: %v: not established within %v: %v", req.RemoteAddr(), a.opts.Timeout, err)
			default:
				logf("rdma cm: %v: %v", req.RemoteAddr(), err)
			}
			a.s.c.cmFailed.Add(1)
			return
		}
		logf("rdma cm: sender %v connected (QP %#x)", c.RemoteAddr(), ss.q.num())
		a.s.c.cmConnects.Add(1)
		// Not in wg: the watch lasts as long as the connection.
		go a.s.watchCM(c, ss, logf)
	}()
}

// evict makes room for a new request while MaxAccepts run: it cancels the
// oldest accept not yet ESTABLISHED (its requester gets a REJ) and takes
// its slot when that accept has ended. It reports false if every accept
// is established, or the slot did not come free within Timeout or before
// ctx, ServeCM's, was done.
func (a *cmAccepts) evict(ctx context.Context) bool {
	a.mu.Lock()
	var oldest *cmAccept
	for x := range a.running {
		if !x.evicted.Load() && !x.established.Load() && (oldest == nil || x.since.Before(oldest.since)) {
			oldest = x
		}
	}
	if oldest != nil {
		oldest.evicted.Store(true)
		oldest.cancel()
	}
	a.mu.Unlock()
	if oldest == nil {
		return false
	}
	t := time.NewTimer(a.opts.Timeout)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// refuse rejects a request before any accept; it is logged at the 1st,
// 2nd, 4th, 8th ... refusal, so that a burst does not flood the log.
func (a *cmAccepts) refuse(req *rdmacm.Request, why string) {
	if n := a.s.c.cmRefused.Add(1); n&(n-1) == 0 {
		a.opts.Logf("rdma cm: refused %v: %s (%d refused so far)", req.RemoteAddr(), why, n)
	}
	req.Reject(nil)
}

// acceptCM takes one request: a QP of the server's own, the slots posted
// on it if nobody holds them, the accept, and once ESTABLISHED (then it
// calls established) the switch to it. It returns the connection's
// session and CM connection.
func (s *Server) acceptCM(ctx context.Context, req *rdmacm.Request, established func()) (*session, *rdmacm.Conn, error) {
	if got, want := req.Context().Device(), s.dev.ctx.Device(); got.NodeGUID != want.NodeGUID {
		req.Reject(nil)
		return nil, nil, fmt.Errorf("request arrived on %s, the server receives on %s", got.Name, want.Name)
	}
	q, err := s.takeQueue()
	if err != nil {
		req.Reject(nil)
		return nil, nil, err
	}
	// early is the session started before the accept, when no sender held
	// the slots; qGone says q belongs to a session (which closes it).
	var early *session
	qGone := false
	setup := func(c *rdmacm.Conn) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return ErrClosed
		}
		if s.sess != nil {
			return nil // posted at the switch, once ESTABLISHED
		}
		qGone = true
		if err := s.startSessionLocked(q, c, false, nil); err != nil {
			return err
		}
		early = s.sess
		return nil
	}
	c, err := req.AcceptQP(ctx, q.qp, rdmacm.Options{Setup: setup})
	if err != nil {
		switch {
		case early != nil:
			s.endSession(early) // closes q
		case !qGone:
			err = errors.Join(err, q.close())
		}
		return nil, nil, err
	}
	established()
	// The CM's RTR set the RNR NAK delay to 0 (655 ms): a sender kept
	// waiting on RNR NAKs (until the switch, or behind a slow consumer)
	// would stall that long each time.
	if err := q.setMinRNRTimer(s.cfg.MinRNRTimer); err != nil {
		if early != nil {
			s.endSession(early) // closes q
			return nil, nil, errors.Join(err, c.Close())
		}
		return nil, nil, errors.Join(err, c.Close(), q.close())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if early != nil {
		if s.sess != early {
			// Replaced (or closed) between the setup and ESTABLISHED.
			return nil, nil, errors.Join(errors.New("replaced by a newer sender before it was established"), c.Close())
		}
		return early, c, nil
	}
	ss, err := s.replaceSessionLocked(q, c)
	if err != nil {
		return nil, nil, errors.Join(err, c.Close())
	}
	return ss, c, nil
}

// watchCM waits for the CM connection's end (the sender disconnected or
// died, or the device went away) and then ends its session, if it is still
// the running one. It returns when c is closed (replaced, or the server
// closed).
func (s *Server) watchCM(c *rdmacm.Conn, ss *session, logf func(string, ...any)) {
	for {
		ev, err := c.WaitEvent(context.Background())
		if err != nil {
			return
		}
		switch ev.Type {
		case rdmacm.EventDisconnected, rdmacm.EventDeviceRemoval, rdmacm.EventUnreachable:
			logf("rdma cm: sender %v gone (%v)", c.RemoteAddr(), ev.Type)
			s.endSession(ss)
			return
		}
	}
}
