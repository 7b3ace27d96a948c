package server

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// DefaultMaxCMAccepts is how many RDMA CM accepts ServeCM runs at once by
// default.
const DefaultMaxCMAccepts = 8

// CMOptions tune ServeCM.
type CMOptions struct {
	// MaxAccepts is how many requests may be between their arrival and
	// ESTABLISHED at once; a request beyond it is rejected at once
	// (Stats.CMFailures). 0 means DefaultMaxCMAccepts.
	MaxAccepts int
	// Logf, when set, reports each CM sender's arrival and departure and
	// every failed accept.
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
//
// ServeCM returns when ctx is done (ctx.Err()), the server is closed
// (ErrClosed) or l fails; it closes l and waits for the accepts in
// progress. The running CM connection, if any, stays (and so does the
// goroutine watching its events) until it ends or the server closes.
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	go func() {
		select {
		case <-s.done:
			l.Close()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.Close()
	slots := make(chan struct{}, opts.MaxAccepts)
	for {
		req, err := l.Request(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			select {
			case <-s.done:
				return ErrClosed
			default:
			}
			return fmt.Errorf("server: RDMA CM request: %w", err)
		}
		select {
		case slots <- struct{}{}:
		default:
			s.c.cmFailed.Add(1)
			opts.Logf("rdma cm: rejected %v: %d accepts running", req.RemoteAddr(), opts.MaxAccepts)
			req.Reject(nil)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss, c, err := s.acceptCM(ctx, req)
			<-slots
			if err != nil {
				s.c.cmFailed.Add(1)
				opts.Logf("rdma cm: %v: %v", req.RemoteAddr(), err)
				return
			}
			s.c.cmConnects.Add(1)
			opts.Logf("rdma cm: sender %v connected (QP %#x)", c.RemoteAddr(), ss.q.num())
			// Not in wg: the watch lasts as long as the connection.
			go s.watchCM(c, ss, opts.Logf)
		}()
	}
}

// acceptCM takes one request: a QP of the server's own, the slots posted
// on it if nobody holds them, the accept, and once ESTABLISHED the switch
// to it. It returns the connection's session and CM connection.
func (s *Server) acceptCM(ctx context.Context, req *rdmacm.Request) (*session, *rdmacm.Conn, error) {
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
		case uverbs.CMEventDisconnected, uverbs.CMEventDeviceRemoval, uverbs.CMEventUnreachable:
			logf("rdma cm: sender %v gone (%v)", c.RemoteAddr(), ev.Type)
			s.endSession(ss)
			return
		}
	}
}
