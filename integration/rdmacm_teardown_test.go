//go:build integration

package integration

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// setupMR is a Setup that registers a page on the connection's PD and
// posts a receive into it, and the Teardown that deregisters and frees
// it; it counts the calls of each.
type setupMR struct {
	buf                 *uverbs.Buffer
	mr                  *uverbs.MR
	setups, teardowns   int
	teardownErr         error // what Teardown returns
	teardownSawQPErrors bool  // the QP was in ERROR when Teardown ran
}

func (s *setupMR) options(o rdmacm.Options) rdmacm.Options {
	o.Setup = func(c *rdmacm.Conn) error {
		s.setups++
		var err error
		if s.buf, err = uverbs.NewBuffer(4096, uverbs.BufferOptions{}); err != nil {
			return err
		}
		if s.mr, err = c.PD().RegisterMR(s.buf, uverbs.AccessLocalWrite); err != nil {
			s.release()
			return err
		}
		sge, err := s.mr.SGE(0, 4096)
		if err == nil {
			err = c.QP().PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{sge}}})
		}
		if err != nil {
			s.release()
		}
		return err
	}
	o.Teardown = func(c *rdmacm.Conn) error {
		s.teardowns++
		s.teardownSawQPErrors = c.QP().State() == qp.StateError
		s.release()
		return s.teardownErr
	}
	return o
}

func (s *setupMR) release() {
	if s.mr != nil {
		s.mr.Close()
		s.mr = nil
	}
	if s.buf != nil {
		s.buf.Close()
		s.buf = nil
	}
}

// A connect that fails after Options.Setup registered an MR on the
// connection's PD leaves nothing behind: Teardown runs once (with the QP
// in ERROR), deregisters the MR, and the PD, CQ, QP, CM id go with it, so
// that rxe0's and rxe1's kernel resource counts are back to the baseline
// when Dial, DialUD or Accept returns. A connection established first
// keeps both devices' contexts open throughout, as on a long-lived server:
// a PD the failure path could not destroy (EBUSY, the MR still on it)
// would stay until that context closed. The cases: Dial rejected by the
// listener (Teardown's own error joined to the RejectError), DialUD
// rejected, and Accept after its REP went out, ended by its deadline (the
// requester never sends the RTU). Teardown does not run on the successful
// connects, on either side.
func TestCMTeardownAfterFailedConnect(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	initial0, initial1 := rdmaResources(t, "rxe0"), rdmaResources(t, "rxe1")
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7680", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// The connection that holds both devices' contexts.
	var held, heldServer setupMR
	accepted := make(chan *rdmacm.Conn, 1)
	go func() {
		r, err := l.Request(ctx)
		if err != nil {
			t.Error(err)
			accepted <- nil
			return
		}
		c, err := r.Accept(ctx, heldServer.options(rdmacm.Options{}))
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	hc, err := rdmacm.Dial(ctx, "10.99.0.1:7680", held.options(rdmacm.Options{Source: cmAddr1}))
	if err != nil {
		t.Fatal(err)
	}
	hs := <-accepted
	if hs == nil {
		hc.Close()
		t.FailNow()
	}
	defer func() {
		held.release()
		heldServer.release()
		if err := errors.Join(hc.Close(), hs.Close()); err != nil {
			t.Errorf("closing the held connection: %v", err)
		}
	}()
	if held.teardowns+heldServer.teardowns != 0 || held.setups != 1 || heldServer.setups != 1 {
		t.Errorf("successful connect: Setup ran %d and %d times, Teardown %d and %d (want 1, 1, 0, 0)",
			held.setups, heldServer.setups, held.teardowns, heldServer.teardowns)
	}
	t.Logf("with the held connection: rxe0 %v, rxe1 %v", rdmaResources(t, "rxe0"), rdmaResources(t, "rxe1"))

	// checkFailed asserts what every failed connect must leave: Setup and
	// Teardown ran once each, the QP was in ERROR for Teardown, and the
	// counts are back at the case's baseline.
	checkFailed := func(t *testing.T, what string, s *setupMR, base0, base1 map[string]uint64) {
		t.Helper()
		defer s.release() // when Teardown did not run
		waitResources(t, "rxe0", base0, 3*time.Second)
		waitResources(t, "rxe1", base1, 3*time.Second)
		if s.setups != 1 || s.teardowns != 1 || !s.teardownSawQPErrors {
			t.Errorf("%s: Setup ran %d times, Teardown %d (QP in ERROR: %v); want once each, in ERROR", what, s.setups, s.teardowns, s.teardownSawQPErrors)
		}
	}

	// Dial, rejected by the listener; Teardown's error comes back too.
	t.Run("DialRejected", func(t *testing.T) {
		base0, base1 := rdmaResources(t, "rxe0"), rdmaResources(t, "rxe1")
		go func() {
			r, err := l.Request(ctx)
			if err == nil {
				err = r.Reject([]byte("go away"))
			}
			if err != nil {
				t.Error(err)
			}
		}()
		errTeardown := errors.New("teardown's own error")
		dialer := setupMR{teardownErr: errTeardown}
		c, err := rdmacm.Dial(ctx, "10.99.0.1:7680", dialer.options(rdmacm.Options{Source: cmAddr1}))
		if err == nil {
			c.Close()
			t.Fatal("Dial succeeded against a listener that rejects")
		}
		var re *rdmacm.RejectError
		if !errors.As(err, &re) || re.Reason != rdmacm.RejectConsumer || !errors.Is(err, errTeardown) || errors.Is(err, unix.EBUSY) {
			t.Errorf("rejected Dial: %v; want the RejectError (reason 28) and Teardown's error, no EBUSY", err)
		}
		checkFailed(t, "rejected Dial", &dialer, base0, base1)
	})

	// DialUD, rejected by a UD listener.
	t.Run("DialUDRejected", func(t *testing.T) {
		base1 := rdmaResources(t, "rxe1")
		lu, err := rdmacm.ListenUD(ctx, "10.99.0.1:7679", rdmacm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer lu.Close()
		base0 := rdmaResources(t, "rxe0") // with the UD listener's id
		go func() {
			r, err := lu.Request(ctx)
			if err == nil {
				err = r.Reject(nil)
			}
			if err != nil {
				t.Error(err)
			}
		}()
		var udDialer setupMR
		c, err := rdmacm.DialUD(ctx, "10.99.0.1:7679", udDialer.options(rdmacm.Options{Source: cmAddr1}))
		if err == nil {
			c.Close()
			t.Fatal("DialUD succeeded against a listener that rejects")
		}
		var ee *rdmacm.EventError
		if !errors.As(err, &ee) || ee.Event != rdmacm.EventUnreachable || errors.Is(err, unix.EBUSY) {
			t.Errorf("rejected DialUD: %v; want an UNREACHABLE EventError, no EBUSY", err)
		}
		checkFailed(t, "rejected DialUD", &udDialer, base0, base1)
	})

	// Accept, its REP out, ended by its deadline: a raw requester on rxe1
	// never sends the RTU. rxe1's count includes the requester's id until
	// its channel closes.
	t.Run("AcceptDeadline", func(t *testing.T) {
		base0, base1 := rdmaResources(t, "rxe0"), rdmaResources(t, "rxe1")
		ach, err := ucma.Open()
		if err != nil {
			t.Fatal(err)
		}
		rawConnect(t, ctx, ach, 1, netip.MustParseAddrPort("10.99.0.1:7680"), 0x4343)
		r, err := l.Request(ctx)
		if err != nil {
			ach.Close()
			t.Fatal(err)
		}
		var acceptor setupMR
		short, stop := context.WithTimeout(ctx, 2*time.Second)
		c, err := r.Accept(short, acceptor.options(rdmacm.Options{}))
		stop()
		if err == nil {
			c.Close()
			ach.Close()
			t.Fatal("Accept returned a connection although no RTU came")
		}
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, unix.EBUSY) {
			t.Errorf("Accept without RTU: %v; want the deadline alone", err)
		}
		awaitRaw(t, ctx, ach, ucma.EventConnectResponse, 10*time.Second)
		if got := rdmaResources(t, "rxe0"); !maps.Equal(got, base0) {
			t.Errorf("rxe0 when Accept returned: %v, want the baseline %v", got, base0)
		}
		if err := ach.Close(); err != nil {
			t.Error(err)
		}
		checkFailed(t, "Accept past its deadline", &acceptor, base0, base1)
	})

	held.release()
	heldServer.release()
	if err := errors.Join(hc.Close(), hs.Close(), l.Close()); err != nil {
		t.Errorf("close: %v", err)
	}
	waitResources(t, "rxe0", initial0, 3*time.Second)
	waitResources(t, "rxe1", initial1, 3*time.Second)
}
