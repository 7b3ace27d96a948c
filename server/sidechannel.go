package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pureverbs/pureverbs/qp"
)

// Side-channel defaults.
const (
	DefaultExchangeTimeout = 3 * time.Second
	DefaultMaxExchanges    = 8
)

// ServeOptions tune the side channel.
type ServeOptions struct {
	// Timeout bounds a client's whole exchange (its record, ours, its
	// "done"), however it trickles its bytes; 0 means 3 s.
	Timeout time.Duration
	// MaxExchanges is how many exchanges may run at once. A connection
	// beyond it evicts the oldest exchange whose client has not sent its
	// whole record (Stats.Evicted), or, if every client has, is closed at
	// once (Stats.Refused): silent strangers cannot lock a reconnecting
	// sender out until their Timeout. 0 means 8. Each
	// running exchange holds one 52-byte record, a goroutine, and, once
	// its record parsed, a QP and CQ of its own.
	MaxExchanges int
	// AllowedSenders, when not empty, is the allow-list: a client whose
	// address is in none of the prefixes is closed at once
	// (Stats.Refused).
	AllowedSenders []netip.Prefix
	// WatchPeer ends a connection when its sender closes the TCP
	// connection (a killed sender's kernel closes it). Senders written
	// after rdma-core's examples close it right after "done": leave
	// WatchPeer off for them; a new sender then replaces the old one.
	WatchPeer bool
	// Logf, when set, reports each sender's arrival and departure and
	// every failed exchange, and refused connections now and then.
	Logf func(format string, args ...any)
}

// Serve runs the side channel on ln until ctx is done or ln fails. For
// each client it reads the 52-byte pingpong record (LID:QPN:PSN:GID +
// NUL), connects a new QP of its own to it, answers with the server's
// record and waits for "done"; only then does the new sender replace the
// previous one (whose QP goes to ERROR and is destroyed; slab and MR
// stay). Exchanges run concurrently with accept and with each other, at
// most MaxExchanges at once, each within Timeout: garbage, half records,
// silent or slow clients and port scans cost the live stream nothing. A
// failed exchange is logged and counted (Stats.ExchangeFailures). Serve
// closes ln when it returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener, opts ServeOptions) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrClosed
	case s.completed || s.serving:
		s.mu.Unlock()
		return ErrConnected
	}
	s.serving = true
	s.ways.Add(1)
	defer s.ways.Done()
	s.mu.Unlock()
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultExchangeTimeout
	}
	if opts.MaxExchanges <= 0 {
		opts.MaxExchanges = DefaultMaxExchanges
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	s.mu.Lock()
	s.logf = opts.Logf
	s.mu.Unlock()
	sc := &sideChannel{s: s, opts: opts, slots: make(chan struct{}, opts.MaxExchanges), conns: map[net.Conn]*exchanging{}}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	s.closeOnStop(ctx, ln)
	defer sc.shutdown()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if transientAccept(err) {
				// Out of descriptors in a connection burst: those already
				// accepted finish (or time out) and free theirs.
				time.Sleep(5 * time.Millisecond)
				continue
			}
			ln.Close()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if s.stopped() {
				return ErrClosed
			}
			return fmt.Errorf("server: side channel accept: %w", err)
		}
		if !sc.allowed(conn.RemoteAddr()) {
			sc.refuse(conn, "not on the allow-list")
			continue
		}
		select {
		case sc.slots <- struct{}{}:
		default:
			if !sc.evict(ctx) {
				sc.refuse(conn, fmt.Sprintf("%d exchanges running, each past its record", opts.MaxExchanges))
				continue
			}
		}
		x := &exchanging{since: time.Now()}
		sc.mu.Lock()
		sc.conns[conn] = x
		sc.mu.Unlock()
		sc.wg.Add(1)
		go func() {
			defer sc.wg.Done()
			sc.handle(conn, x)
		}()
	}
}

// transientAccept reports an accept error that a later accept may not
// have: out of file descriptors, or a connection reset before it was
// accepted.
func transientAccept(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// sideChannel is one Serve's state.
type sideChannel struct {
	s     *Server
	opts  ServeOptions
	slots chan struct{} // one per running exchange
	wg    sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]*exchanging // connections in an exchange or watched, closed by shutdown
	live  net.Conn                 // the running sender's connection, closed by shutdown
}

// exchanging is one connection's exchange in progress.
type exchanging struct {
	since   time.Time
	heard   atomic.Bool // its whole record arrived: not evictable
	evicted bool        // closed by evict (under sideChannel.mu)
}

// evict makes room for a new client while MaxExchanges run: it closes the
// oldest exchange whose client has not sent its whole record (silent,
// slow, a port scan) and takes its slot when that exchange has ended. It
// reports false if every client is past its record, or the slot did not
// come free within Timeout or before ctx, Serve's, was done.
func (sc *sideChannel) evict(ctx context.Context) bool {
	sc.mu.Lock()
	var victim net.Conn
	var oldest *exchanging
	for c, x := range sc.conns {
		if !x.evicted && !x.heard.Load() && (oldest == nil || x.since.Before(oldest.since)) {
			victim, oldest = c, x
		}
	}
	if victim != nil {
		oldest.evicted = true
		victim.Close() // its exchange fails at once and frees its slot
	}
	sc.mu.Unlock()
	if victim == nil {
		return false
	}
	if n := sc.s.c.evicted.Add(1); n&(n-1) == 0 {
		sc.opts.Logf("side channel: evicted %s, silent for %v, to make room (%d evicted so far)", victim.RemoteAddr(), time.Since(oldest.since).Round(time.Millisecond), n)
	}
	t := time.NewTimer(sc.opts.Timeout)
	defer t.Stop()
	select {
	case sc.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// allowed checks addr against the allow-list.
func (sc *sideChannel) allowed(addr net.Addr) bool {
	if len(sc.opts.AllowedSenders) == 0 {
		return true
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	return allowedAddr(sc.opts.AllowedSenders, ap.Addr())
}

// allowedAddr checks ip against an allow-list (ServeOptions.AllowedSenders,
// CMOptions.AllowedSenders): an empty list allows every address, an
// IPv4-mapped address is checked as IPv4.
func allowedAddr(allow []netip.Prefix, ip netip.Addr) bool {
	if len(allow) == 0 {
		return true
	}
	ip = ip.Unmap()
	for _, p := range allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// refuse closes a connection before any exchange; it is logged at the
// 1st, 2nd, 4th, 8th ... refusal, so that a burst does not flood the log.
func (sc *sideChannel) refuse(conn net.Conn, why string) {
	n := sc.s.c.refused.Add(1)
	if n&(n-1) == 0 {
		sc.opts.Logf("side channel: refused %s: %s (%d refused so far)", conn.RemoteAddr(), why, n)
	}
	conn.Close()
}

func (sc *sideChannel) untrack(conn net.Conn) {
	sc.mu.Lock()
	delete(sc.conns, conn)
	sc.mu.Unlock()
}

// shutdown closes every client connection (ending their exchanges and
// watchers) and waits for their goroutines.
func (sc *sideChannel) shutdown() {
	sc.mu.Lock()
	for c := range sc.conns {
		c.Close()
	}
	if sc.live != nil {
		sc.live.Close()
	}
	sc.mu.Unlock()
	sc.wg.Wait()
}

// handle runs one client: the exchange, then (with WatchPeer) the watch.
func (sc *sideChannel) handle(conn net.Conn, x *exchanging) {
	ss, err := sc.s.exchange(conn, sc.opts.Timeout, &x.heard)
	<-sc.slots
	if err != nil {
		sc.s.c.exFailed.Add(1)
		sc.opts.Logf("side channel: %s: %v", conn.RemoteAddr(), err)
		conn.Close()
		sc.untrack(conn)
		return
	}
	sc.s.c.exchanges.Add(1)
	sc.opts.Logf("side channel: sender %s connected", conn.RemoteAddr())
	sc.connected(conn, ss)
}

// connected keeps the connection of a sender whose exchange completed:
// it stays open until the sender closes it, the next one replaces this
// one (endSessionLocked closes it) or Serve returns. With WatchPeer it
// watches it until then, tracked in conns so that shutdown ends the
// watch. Two exchanges completing close together may get here in either
// order: live names the connection only while its session is the running
// one, checked under sc.mu, so that the later replacement always wins.
func (sc *sideChannel) connected(conn net.Conn, ss *session) {
	sc.mu.Lock()
	if !sc.opts.WatchPeer {
		delete(sc.conns, conn)
	}
	if sc.s.isRunning(ss) {
		sc.live = conn
	}
	sc.mu.Unlock()
	if sc.opts.WatchPeer {
		sc.s.watch(conn, ss, sc.opts.Logf)
		sc.untrack(conn)
	}
}

// exchange runs one client's handshake on a QP of its own and, once the
// client said "done", makes it the running connection. It sets heard when
// the client's whole record has arrived.
func (s *Server) exchange(conn net.Conn, timeout time.Duration, heard *atomic.Bool) (*session, error) {
	conn.SetDeadline(time.Now().Add(timeout))
	var rec [qp.PeerRecordLen]byte
	if n, err := io.ReadFull(conn, rec[:]); err != nil {
		return nil, fmt.Errorf("read peer record: got %d of %d bytes: %w", n, qp.PeerRecordLen, err)
	}
	heard.Store(true)
	var p qp.Peer
	if err := p.UnmarshalText(rec[:]); err != nil {
		return nil, err
	}
	q, me, err := s.prepare(p)
	if err != nil {
		return nil, err
	}
	_, err = conn.Write(record(me))
	var done [5]byte
	if err == nil {
		_, err = io.ReadFull(conn, done[:])
		if err == nil && !bytes.Equal(done[:], doneMsg) {
			err = fmt.Errorf("peer sent %q, want \"done\\x00\"", done[:])
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("QP %#x: %w", p.QPN, err), q.close())
	}
	conn.SetDeadline(time.Time{})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replaceSessionLocked(q, conn)
}

// prepare makes a QP for peer p, connected (RTR, RTS) but with nothing
// posted yet: a sender that starts before the switch gets RNR NAKs. It
// returns the queue and the server's record for p.
func (s *Server) prepare(p qp.Peer) (*rcQueue, qp.Peer, error) {
	q, err := s.takeQueue()
	if err != nil {
		return nil, qp.Peer{}, err
	}
	mtu := s.cfg.PathMTU
	if mtu == 0 {
		mtu = s.dev.port.ActiveMTU
	}
	psn := rand.Uint32() & 0xffffff
	if err := q.connect(p, mtu, s.cfg.MinRNRTimer, psn); err != nil {
		return nil, qp.Peer{}, errors.Join(fmt.Errorf("connect to QP %#x: %w", p.QPN, err), q.close())
	}
	return q, qp.Peer{QPN: q.num(), PSN: psn, GID: s.dev.gid}, nil
}

// watch waits for the sender to close the connection and then ends its
// connection (if it is still the current one).
func (s *Server) watch(conn net.Conn, ss *session, logf func(string, ...any)) {
	var b [64]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return // replaced by the next sender, or Serve ended
			}
			logf("side channel: sender %s gone (%v)", conn.RemoteAddr(), err)
			s.endSession(ss)
			return
		}
	}
}

// isRunning reports whether ss is the running connection.
func (s *Server) isRunning(ss *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess == ss
}

// endSession ends ss if it is still the running connection, draining what
// arrived.
func (s *Server) endSession(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == ss && !s.closed {
		s.endSessionLocked(true)
	}
}

// doneMsg is the client's last word after it read the server's record.
var doneMsg = []byte("done\x00")

// record is p's wire form in the side channel: its text (qp.Peer's
// MarshalText, rdma-core's pingpong format) and a NUL, qp.PeerRecordLen
// bytes.
func record(p qp.Peer) []byte {
	b, _ := p.MarshalText()
	return append(b, 0)
}
