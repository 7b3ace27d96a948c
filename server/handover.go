package server

import (
	"errors"
	"fmt"
	"io"
)

// The hand-over from one sender to the next, shared by both ways in (the
// side channel's exchange and ServeCM's accept), so that they cannot drift
// apart.

// takeQueue returns the RC queue a new sender connects to: the spare one
// made in advance, or a new one.
func (s *Server) takeQueue() (*rcQueue, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	q := s.fresh
	s.fresh = nil
	s.mu.Unlock()
	if q != nil {
		return q, nil
	}
	return s.dev.newRCQueue()
}

// replaceSessionLocked makes q, connected to a new sender, the running
// session: the running one (if any) is ended with the drain (its QP to
// ERROR, every completion that arrived before the flush handled, its
// connection closed), then every slot is posted on q. conn is the new
// sender's connection, closed when its session ends. On failure q is
// closed (conn is the caller's). The caller holds s.mu.
func (s *Server) replaceSessionLocked(q *rcQueue, conn io.Closer) (*session, error) {
	if s.closed {
		return nil, errors.Join(ErrClosed, q.close())
	}
	if err := s.endSessionLocked(true); err != nil {
		return nil, errors.Join(fmt.Errorf("end previous sender: %w", err), q.close())
	}
	if err := s.startSessionLocked(q, conn, false, nil); err != nil {
		return nil, fmt.Errorf("start receiving from QP %#x: %w", q.num(), err)
	}
	return s.sess, nil
}
