package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/pureverbs/pureverbs/qp"
)

// ServeOptions tune the side channel.
type ServeOptions struct {
	// Timeout bounds each step of the exchange (reading the record,
	// writing ours, reading "done"); 0 means 10 s.
	Timeout time.Duration
	// WatchPeer ends a connection when its sender closes the TCP
	// connection (a killed sender's kernel closes it). Senders written
	// after rdma-core's examples close it right after "done": leave
	// WatchPeer off for them; a new sender then replaces the old one.
	WatchPeer bool
	// Logf, when set, reports each sender's arrival and departure and
	// every rejected exchange.
	Logf func(format string, args ...any)
}

// Serve runs the side channel on ln until ctx is done or ln fails: for each
// client it reads the 52-byte pingpong record (LID:QPN:PSN:GID + NUL),
// connects a QP to it, answers with the server's record and waits for
// "done". A new client replaces the previous sender (its QP goes to ERROR
// and is destroyed; slab and MR stay). A malformed or truncated exchange is
// logged and the server keeps listening. Serve closes ln when it returns.
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
	s.mu.Unlock()
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	go func() {
		select {
		case <-s.done:
			ln.Close()
		case <-ctx.Done():
		}
	}()
	var prev net.Conn
	var watchers sync.WaitGroup
	defer func() {
		if prev != nil {
			prev.Close()
		}
		watchers.Wait()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			ln.Close()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			select {
			case <-s.done:
				return ErrClosed
			default:
			}
			return fmt.Errorf("server: side channel accept: %w", err)
		}
		ss, err := s.exchange(conn, opts.Timeout)
		if err != nil {
			logf("side channel: %s: %v", conn.RemoteAddr(), err)
			conn.Close()
			continue
		}
		logf("side channel: sender %s connected", conn.RemoteAddr())
		if prev != nil {
			prev.Close()
		}
		prev = conn
		if opts.WatchPeer {
			watchers.Add(1)
			go func() {
				defer watchers.Done()
				s.watch(conn, ss, logf)
			}()
		}
	}
}

// exchange runs one client's handshake and returns the connection it made.
func (s *Server) exchange(conn net.Conn, timeout time.Duration) (*session, error) {
	var rec [qp.PeerRecordLen]byte
	conn.SetDeadline(time.Now().Add(timeout))
	if n, err := io.ReadFull(conn, rec[:]); err != nil {
		return nil, fmt.Errorf("read peer record: got %d of %d bytes: %w", n, qp.PeerRecordLen, err)
	}
	var p qp.Peer
	if err := p.UnmarshalText(rec[:]); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if err := s.endSessionLocked(true); err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("end previous sender: %w", err)
	}
	mtu := s.cfg.PathMTU
	if mtu == 0 {
		mtu = s.dev.port.ActiveMTU
	}
	psn := s.sendPSN
	if err := s.connectLocked(p, mtu, s.cfg.MinRNRTimer, false); err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("connect to QP %#x: %w", p.QPN, err)
	}
	ss := s.sess
	me := qp.Peer{QPN: ss.q.num(), PSN: psn, GID: s.dev.gid}
	s.mu.Unlock()
	conn.SetDeadline(time.Now().Add(timeout))
	_, err := conn.Write(record(me))
	var done [5]byte
	if err == nil {
		_, err = io.ReadFull(conn, done[:])
		if err == nil && !bytes.Equal(done[:], doneMsg) {
			err = fmt.Errorf("peer sent %q, want \"done\\x00\"", done[:])
		}
	}
	if err != nil {
		s.endSession(ss)
		return nil, fmt.Errorf("after connecting to QP %#x: %w", p.QPN, err)
	}
	conn.SetDeadline(time.Time{})
	return ss, nil
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

// endSession ends ss if it is still the running connection, draining what
// arrived.
func (s *Server) endSession(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == ss && !s.closed {
		s.endSessionLocked(true)
	}
}
