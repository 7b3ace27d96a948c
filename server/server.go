package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

// Errors of the connection calls.
var (
	// ErrConnected: CompleteConnection was already called, or the side
	// channel owns the connection.
	ErrConnected = errors.New("server: already connected; a Server completes one connection (the side channel replaces its own)")
	// ErrClosed: the server was closed. It is uverbs.ErrClosed, the one
	// value for every package.
	ErrClosed = uverbs.ErrClosed
	// ErrReceiveOnly: the server does not send.
	ErrReceiveOnly = errors.New("server: sending is not supported: the server only receives")
)

// Server receives RDMA SEND_WITH_IMM messages on one RC queue pair into a
// slab of fixed slots and hands them downstream as Frames, without a copy.
type Server struct {
	cfg    Config
	dev    *device
	pool   *pool
	c      counters
	frames chan Frame

	mu        sync.Mutex
	fresh     *rcQueue                         // the QP New made, in INIT, for the first connection
	sess      *session                         // the running connection, nil before the first
	completed bool                             // CompleteConnection was called
	serving   bool                             // the side channel owns connections
	servingCM bool                             // ServeCM owns connections (beside the side channel)
	logf      func(format string, args ...any) // the side channel's Logf
	peerGID   uverbs.GID
	recvPSN   uint32 // proposed first PSN of the peer's sends
	sendPSN   uint32 // first PSN of the next connection's sends
	closed    bool

	closing  atomic.Bool          // Close was called
	stopping chan struct{}        // closed when Close's teardown starts: Serve and ServeCM end
	ways     sync.WaitGroup       // Serve and ServeCM running: the teardown waits for them
	running  atomic.Pointer[loop] // the loop running now, if any (one at a time)
	torn     chan struct{}        // closed when Close's teardown is over
	closeErr error                // the teardown's error, after torn

	done    chan struct{}
	errOnce sync.Once
	err     error

	removalWait *fdwait.Poller // what watchRemoval waits with, nil if it does not
}

// session is one connection: its queue and loop, and what connected its
// sender (the side-channel connection or the RDMA CM connection), if any.
type session struct {
	q     *rcQueue
	l     *loop
	conn  io.Closer
	stop  atomic.Bool
	drain atomic.Bool
	done  chan struct{}
	err   error // why the loop ended, after done
}

// New validates cfg, opens the device, checks the port and GID, and makes
// the slab, its MR (local write only), a completion channel, a wake fd, a
// CQ and an RC QP in INIT with fresh random PSNs. Nothing is received until
// CompleteConnection or Serve. On failure everything made is released.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	dev, err := openDevice(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, dev: dev, done: make(chan struct{}), torn: make(chan struct{}), stopping: make(chan struct{})}
	s.c.ringMode, s.c.ringSize = cfg.Ring, cfg.RingSize
	if cfg.Handler == nil {
		s.frames = make(chan Frame, cfg.Depth)
	}
	mem, addr, lkey := dev.slab()
	if s.pool, err = newPool(mem, addr, lkey, cfg.MaxPayload, cfg.Depth, dev.ch.FD(), dev.freeSlab); err != nil {
		return nil, errors.Join(err, dev.closeAll())
	}
	if s.fresh, err = dev.newRCQueue(); err != nil {
		err = errors.Join(err, dev.close())
		err = errors.Join(err, s.pool.close()) // nothing is held: frees the slab, after the MR is gone
		return nil, err
	}
	s.c.postedLow.Store(int64(cfg.Depth))
	s.newPSNs()
	if err := s.watchRemoval(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// newPSNs draws the random 24-bit PSNs of the next connection.
func (s *Server) newPSNs() {
	s.recvPSN = rand.Uint32() & 0xffffff
	s.sendPSN = rand.Uint32() & 0xffffff
}

// QPN is the number of the QP the next (or current) connection uses. The
// side channel replaces the QP for every sender.
func (s *Server) QPN() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess.q.num()
	}
	if s.fresh != nil {
		return s.fresh.num()
	}
	return 0
}

// GID is the local GID (16 bytes, network order).
func (s *Server) GID() uverbs.GID { return s.dev.gid }

// GIDString formats the GID as rogue does: eight groups of four hex digits
// joined by colons, no compression.
func (s *Server) GIDString() string { return rogueGID(s.dev.gid) }

func rogueGID(g uverbs.GID) string {
	b := make([]byte, 0, 39)
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b = append(b, ':')
		}
		b = fmt.Appendf(b, "%02x%02x", g[i], g[i+1])
	}
	return string(b)
}

// SendPSN is the first PSN the server's QP sends with (the receive PSN a
// peer programs, were the server to send).
func (s *Server) SendPSN() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendPSN
}

// RecvPSN is a random first PSN the server proposes for the peer's sends,
// for a sender whose PSN the host chooses; CompleteConnection takes the
// PSN the peer actually starts from.
func (s *Server) RecvPSN() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recvPSN
}

// MRAddr is the slab's address in the memory region.
func (s *Server) MRAddr() uint64 { return s.pool.base }

// RKey is the memory region's remote key. The MR grants no remote access:
// an RDMA WRITE or READ with it fails with a remote access error.
func (s *Server) RKey() uint32 { return s.dev.mr.RKey() }

// Depth is the number of receive slots.
func (s *Server) Depth() int { return s.cfg.Depth }

// MaxPayload is the size of one slot.
func (s *Server) MaxPayload() int { return s.cfg.MaxPayload }

// ActiveMTU is the port's active MTU.
func (s *Server) ActiveMTU() uverbs.MTU { return s.dev.port.ActiveMTU }

// SetPeerGID sets the GID of the sender CompleteConnection connects to; it
// must be exactly 16 bytes.
func (s *Server) SetPeerGID(gid []byte) error {
	if len(gid) != 16 {
		return fmt.Errorf("server: peer GID must be 16 bytes, got %d", len(gid))
	}
	s.mu.Lock()
	copy(s.peerGID[:], gid)
	s.mu.Unlock()
	return nil
}

// CompleteConnection connects the QP to the sender (QP number peerQPN,
// first PSN peerPSN, GID from SetPeerGID) and starts receiving: it checks
// the arguments, posts every slot, moves the QP INIT→RTR→RTS and starts
// the receive loop. It may be called once; after the loop ends (the QP
// went to ERROR) Done is closed and Err says why.
func (s *Server) CompleteConnection(peerQPN, peerPSN uint32, pmtu uverbs.MTU, minRNRTimer uint8) error {
	if peerQPN > 0xffffff || peerPSN > 0xffffff {
		return fmt.Errorf("server: complete connection: QPN %#x / PSN %#x exceed 24 bits", peerQPN, peerPSN)
	}
	if err := checkPathMTU(pmtu, s.dev.port.ActiveMTU); err != nil {
		return err
	}
	if err := checkMinRNRTimer(minRNRTimer); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.completed || s.serving || s.servingCM:
		return ErrConnected
	case s.peerGID == uverbs.GID{}:
		return errors.New("server: complete connection: no peer GID (call SetPeerGID)")
	}
	s.completed = true
	q := s.fresh
	s.fresh = nil
	p := qp.Peer{QPN: peerQPN, PSN: peerPSN, GID: s.peerGID}
	// As rogue: every slot is posted before RTR.
	return s.startSessionLocked(q, nil, true, func() error { return q.connect(p, pmtu, minRNRTimer, s.sendPSN) })
}

// startSessionLocked runs one connection on q (in INIT, or already
// connected): every free slot posted, then connect (if not nil) and the
// loop. With terminal set, the loop's end ends the server; otherwise an
// ended loop's connection is torn down (see endSession) and the server
// waits for the next sender. On failure q is closed. s.mu is held.
func (s *Server) startSessionLocked(q *rcQueue, conn io.Closer, terminal bool, connect func() error) error {
	ss := &session{q: q, conn: conn, done: make(chan struct{})}
	ss.l = newLoop(s.pool, q, &s.c, &s.cfg, s.frames, &ss.stop, &ss.drain)
	ss.l.running = &s.running
	err := ss.l.postIdle()
	if err == nil && connect != nil {
		err = connect()
	}
	if err != nil {
		err = errors.Join(err, q.close())
		s.pool.unpostAll()
		return err
	}
	s.c.newConnection()
	s.sess = ss
	s.c.sessions.Add(1)
	go func() {
		ss.err = ss.l.run()
		close(ss.done)
		var hp *HandlerPanicError
		switch {
		case errors.As(ss.err, &hp):
			s.fail(ss.err)
			s.Close()
		case terminal && ss.err != errStopped:
			s.fail(ss.err)
		case ss.err != errStopped:
			// The sender broke the connection, went idle or the loop
			// failed: free its QP now; the slots wait for the next one.
			s.mu.Lock()
			logf := s.logf
			s.mu.Unlock()
			if logf != nil {
				logf("connection to QP %#x ended: %v", q.num(), ss.err)
			}
			s.endSession(ss)
		}
	}()
	return nil
}

// callerLoop returns the receive loop the caller runs on (in the
// Handler), or nil: the loop holds its OS thread while it runs, so no
// other goroutine runs on that thread.
func (s *Server) callerLoop() *loop {
	l := s.running.Load()
	if l == nil {
		return nil
	}
	if tid := l.tid.Load(); tid == 0 || tid != int32(unix.Gettid()) {
		return nil
	}
	return l
}

// endSessionLocked ends the running connection, if any. With drain, the QP
// goes to ERROR first and the loop handles every completion that arrived
// before it; otherwise the loop stops at once. Then the QP and CQ are
// destroyed and the slots they held become free. s.mu is held.
func (s *Server) endSessionLocked(drain bool) error {
	ss := s.sess
	if ss == nil {
		return nil
	}
	s.sess = nil
	var errs []error
	if drain {
		if err := ss.q.toError(); err != nil {
			// No flush will come to end the drain: stop at once.
			errs = append(errs, err)
			drain = false
		}
	}
	if drain {
		ss.drain.Store(true)
	} else {
		ss.stop.Store(true)
	}
	s.pool.wake()
	<-ss.done
	if !ss.drain.Load() {
		errs = append(errs, ss.q.toError())
	}
	errs = append(errs, ss.q.close())
	if ss.conn != nil {
		ss.conn.Close()
	}
	s.pool.unpostAll()
	s.c.sessionEnd.Add(1)
	s.newPSNs()
	return errors.Join(errs...)
}

// stopped reports whether the server stopped or its Close began: Serve
// and ServeCM return ErrClosed then.
func (s *Server) stopped() bool {
	select {
	case <-s.done:
		return true
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// closeOnStop closes c (a listener) when the server stops or its Close
// begins, or not once ctx is done.
func (s *Server) closeOnStop(ctx context.Context, c io.Closer) {
	go func() {
		select {
		case <-s.done:
		case <-s.stopping:
		case <-ctx.Done():
			return
		}
		c.Close()
	}()
}

// fail ends the server with err (the first one wins).
func (s *Server) fail(err error) {
	s.errOnce.Do(func() {
		s.err = err
		close(s.done)
	})
}

// Done is closed when the server stops: Close, or the end of the loop
// CompleteConnection started.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is why the server stopped: nil after a plain Close, ErrFlushed when
// the QP went to ERROR, the *uverbs.DeviceRemovedError when its device was
// removed (uverbs.ErrDeviceRemoved; the server then closed itself), or the
// error that broke the loop.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Frames is the channel frames arrive on when Config.Handler is nil (nil
// otherwise). It is closed by Close; frames still in it must be released.
func (s *Server) Frames() <-chan Frame { return s.frames }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats { return s.c.snapshot(s.pool) }

// Send refuses: the server only receives.
func (s *Server) Send([]byte) error { return ErrReceiveOnly }

// Close ends Serve and ServeCM (each returns ErrClosed once the exchanges
// and accepts it runs have ended, their QPs closed), stops the loop
// (waking it at once if it is parked), moves the QP to ERROR and releases
// every verbs object. Frames still held stay valid
// until released; the last Release unmaps the slab. Idempotent: a second
// Close waits for the first one's teardown and returns nil.
//
// Called from the Handler (on the receive thread), Close cannot wait for
// the loop it runs on: it stops the loop, returns nil at once and the
// teardown runs when the Handler returns (frames of the completion batch
// being handled are still delivered); Done is closed, and Err is nil, when
// it is over.
//
// The QP goes at once: if the ACK of the sender's last message was lost,
// its retransmission finds no QP and the sender retries until its budget
// ends (for ever at retry count 7). A caller that stops after a known last
// frame lets the sender end the connection first (Stats.SessionEnds
// catches up with Stats.Sessions), with a deadline, as rocev2-server -n
// does.
func (s *Server) Close() error {
	l := s.callerLoop()
	if s.closing.Swap(true) {
		if l == nil {
			<-s.torn
		}
		return nil
	}
	if l != nil {
		// Without s.mu: a drain may hold it while waiting for this loop.
		l.stop.Store(true)
		go s.teardown()
		return nil
	}
	return s.teardown()
}

// teardown is Close's work. Serve and ServeCM end first, with the
// exchanges and accepts they run: those hold QPs and CQs of their own on
// the device, which closes after them.
func (s *Server) teardown() error {
	s.mu.Lock()
	s.closed = true
	close(s.stopping)
	s.mu.Unlock()
	s.ways.Wait()
	s.mu.Lock()
	errs := []error{s.endSessionLocked(false)}
	if s.fresh != nil {
		errs = append(errs, s.fresh.close())
		s.fresh = nil
	}
	s.mu.Unlock()
	if s.removalWait != nil {
		s.removalWait.Close() // returns once the watch has left its wait on the Context's fd
	}
	errs = append(errs, s.dev.close())
	errs = append(errs, s.pool.close())
	if s.frames != nil {
		close(s.frames)
	}
	s.fail(nil)
	s.closeErr = errors.Join(errs...)
	close(s.torn)
	return s.closeErr
}
