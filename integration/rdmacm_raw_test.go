//go:build integration

package integration

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// rdma_notify on the raw layer, and the channel's fd through SyscallConn:
// a passive id that accepted, whose requester never sends the RTU, is not
// established (no event, the fd does not poll readable) until
// Notify(COMM_EST) tells the CM that data arrived; then the fd polls
// readable and ESTABLISHED is read. Both ends are QP-less (the CM carries
// the QPNs without looking at them).
func TestUCMANotify(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lch, err := ucma.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer lch.Close()
	lid, err := lch.CreateID(1, ucma.PortSpaceTCP, uverbs.QPTypeRC)
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort("10.99.0.1:7689")
	if err := lch.Bind(lid, addr); err != nil {
		t.Fatal(err)
	}
	if err := lch.Listen(lid, 4); err != nil {
		t.Fatal(err)
	}
	ach, err := ucma.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ach.Close()
	rawConnect(t, ctx, ach, 2, addr, 0x4242)

	req := awaitRaw(t, ctx, lch, ucma.EventConnectRequest, 20*time.Second)
	if p := req.ConnParam(); p.QPNum != 0x4242 {
		t.Errorf("the request carries QPN %#x, want 0x4242", p.QPNum)
	}
	if err := lch.Accept(req.ID, 3, &ucma.ConnParam{QPNum: 0x5151, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 6, RNRRetryCount: 7}, ucma.ECE{}); err != nil {
		t.Fatal(err)
	}
	if ev := awaitRaw(t, ctx, ach, ucma.EventConnectResponse, 20*time.Second); ev.ConnParam().QPNum != 0x5151 {
		t.Errorf("the REP carries QPN %#x, want 0x5151", ev.ConnParam().QPNum)
	}

	rc, err := lch.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	readable := func(timeout time.Duration) bool {
		var n int
		var perr error
		if err := rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, perr = unix.Poll(fds, int(timeout.Milliseconds()))
		}); err != nil {
			t.Fatal(err)
		}
		if perr != nil {
			t.Fatal(perr)
		}
		return n == 1
	}
	if readable(time.Second) {
		ev, err := lch.ReadEvent()
		t.Fatalf("without the RTU or a notify the passive side has an event: %v (status %d), %v", ev.Type, ev.Status, err)
	}
	if err := lch.Notify(req.ID, uverbs.EventCommEst); err != nil {
		t.Fatalf("notify COMM_EST: %v", err)
	}
	if !readable(10 * time.Second) {
		t.Fatal("the channel's fd is not readable 10 s after notify COMM_EST")
	}
	ev, err := lch.ReadEvent()
	if err != nil || ev.Type != ucma.EventEstablished || ev.UID != 3 {
		t.Fatalf("after notify COMM_EST: %v (uid %d), %v; want ESTABLISHED of uid 3", ev.Type, ev.UID, err)
	}
	lch.Close()
	if err := rc.Read(func(uintptr) bool { return true }); err == nil {
		t.Error("the RawConn of a closed channel still reads")
	}
}

// A requester that never sends the RTU: Request.Accept waits for
// ESTABLISHED and returns the context's error when its deadline passes
// (well before the CM's own REP timeouts would end it), with everything
// released by then: the request's channel, QP and device context are gone
// (no background release, nothing for Listener.Close to wait for) and the
// requester sees the REJ at once. DESTROY_ID cancels the REP's retries and
// sends the REJ itself; a REJECT first (the earlier failure path) left
// the REP retrying with the id in TIMEWAIT, and DESTROY_ID then waited
// for its last retry, 69 s on 6.1.
func TestCMAcceptDeadline(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7688", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ach, err := ucma.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ach.Close()
	beforeFDs, beforeMaps := uverbsHeld()
	rawConnect(t, ctx, ach, 1, netip.MustParseAddrPort("10.99.0.1:7688"), 0x4343)
	r, err := l.Request(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	start := time.Now()
	c, err := r.Accept(short, rdmacm.Options{})
	took := time.Since(start)
	if err == nil {
		c.Close()
		t.Fatal("Accept returned a connection although no RTU came")
	}
	if !errors.Is(err, context.DeadlineExceeded) || took > 10*time.Second {
		t.Fatalf("Accept: %v after %v, want the deadline", err, took)
	}
	if fds, maps := uverbsHeld(); !slices.Equal(fds, beforeFDs) || !slices.Equal(maps, beforeMaps) {
		t.Errorf("when Accept returned the process held fds %v and mappings %v; before the request %v and %v", fds, maps, beforeFDs, beforeMaps)
	}
	// The REP went out (Accept was waiting for the RTU), then the REJ.
	awaitRaw(t, ctx, ach, ucma.EventConnectResponse, 10*time.Second)
	ev := awaitRaw(t, ctx, ach, ucma.EventRejected, 5*time.Second)
	if ev.Status != rdmacm.RejectConsumer {
		t.Errorf("REJ reason %d, want %d", ev.Status, rdmacm.RejectConsumer)
	}
	start = time.Now()
	if err := l.Close(); err != nil {
		t.Errorf("listener Close: %v", err)
	}
	t.Logf("Accept returned after %v; the listener's Close took %v", took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// Listener.Close ends an Accept already past its request: the REP is out
// and Accept waits for the RTU (which this requester never sends) when
// the listener closes. Accept returns ErrClosed at once, not after the
// context's hour or the REP's retries, and the requester gets the REJ.
func TestCMListenerCloseEndsAccept(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7686", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ach, err := ucma.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ach.Close()
	rawConnect(t, ctx, ach, 1, netip.MustParseAddrPort("10.99.0.1:7686"), 0x4344)
	r, err := l.Request(ctx)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		long, stop := context.WithTimeout(ctx, time.Hour)
		defer stop()
		c, err := r.Accept(long, rdmacm.Options{})
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	// The REP arriving says Accept is past the request, waiting for the RTU.
	awaitRaw(t, ctx, ach, ucma.EventConnectResponse, 10*time.Second)
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Errorf("listener Close: %v", err)
	}
	select {
	case err := <-accepted:
		if !errors.Is(err, rdmacm.ErrClosed) {
			t.Errorf("Accept after the listener's Close: %v, want ErrClosed", err)
		}
		t.Logf("Accept returned %v after the listener's Close: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waiting for ESTABLISHED 5 s after the listener's Close")
	}
	ev := awaitRaw(t, ctx, ach, ucma.EventRejected, 5*time.Second)
	if ev.Status != rdmacm.RejectConsumer {
		t.Errorf("REJ reason %d, want %d", ev.Status, rdmacm.RejectConsumer)
	}
}

// DialUD's wait for the SIDR reply ends with the context: a UD listener
// takes the request and never answers it.
func TestCMDialUDDeadline(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := rdmacm.ListenUD(ctx, "10.99.0.1:7687", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := make(chan *rdmacm.Request, 1)
	go func() {
		r, _ := l.Request(ctx)
		taken <- r
	}()
	// The context ends 1.5 s after Setup, which runs just before the SIDR
	// REQ goes out, so that it cannot end address resolution on a loaded
	// VM instead.
	waiting, stop := context.WithCancel(ctx)
	var timer *time.Timer
	var start time.Time
	c, err := rdmacm.DialUD(waiting, "10.99.0.1:7687", rdmacm.Options{Source: cmAddr1, Setup: func(*rdmacm.Conn) error {
		start = time.Now()
		timer = time.AfterFunc(1500*time.Millisecond, stop)
		return nil
	}})
	if timer != nil {
		timer.Stop()
	}
	defer stop()
	if err == nil {
		c.Close()
		t.Fatal("DialUD succeeded against a listener that does not answer")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "connect") || time.Since(start) > 10*time.Second {
		t.Errorf("DialUD: %v after %v, want the context's end in the connect step", err, time.Since(start))
	}
	select {
	case r := <-taken:
		if r == nil {
			t.Fatal("the UD listener's Request failed")
		}
		r.Reject(nil)
	case <-time.After(30 * time.Second):
		t.Fatal("the UD listener saw no request: the deadline was not hit waiting for the reply")
	}
}

// The listener's backlog is the kernel's count of CONNECT_REQUESTs
// delivered and not yet read: with Backlog 1 a second request that arrives
// while one is queued is dropped (the kernel does not reject it, so the
// requester's CM sends the REQ again after its timeout, about 6 s on rxe)
// and is seen only after the first was read; with Backlog 0 (the kernel's
// maximum) both are queued at once.
func TestCMListenBacklog(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i, tc := range []struct {
		backlog int
		queued  bool // the second request is queued with the first
	}{{backlog: 1}, {backlog: 0, queued: true}} {
		addr := netip.AddrPortFrom(cmAddr0, uint16(7685-i)).String()
		l, err := rdmacm.Listen(ctx, addr, rdmacm.Options{Backlog: tc.backlog})
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := rdmacm.Dial(ctx, addr, rdmacm.Options{Source: cmAddr1})
				errs <- err
			}()
		}
		time.Sleep(2 * time.Second) // both REQs arrived
		take := func(limit time.Duration) (*rdmacm.Request, time.Duration) {
			c, stop := context.WithTimeout(ctx, limit)
			defer stop()
			start := time.Now()
			r, err := l.Request(c)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			return r, time.Since(start)
		}
		first, _ := take(time.Second)
		if first == nil {
			t.Fatalf("backlog %d: no request queued", tc.backlog)
		}
		second, _ := take(time.Second)
		if (second != nil) != tc.queued {
			t.Errorf("backlog %d: second request queued with the first: %v, want %v", tc.backlog, second != nil, tc.queued)
		}
		if second == nil {
			var took time.Duration
			second, took = take(20 * time.Second)
			t.Logf("backlog %d: the dropped request came again %v after the first was read", tc.backlog, took.Round(time.Millisecond))
			if second == nil {
				t.Errorf("backlog %d: the dropped request never came again", tc.backlog)
			}
		}
		for _, r := range []*rdmacm.Request{first, second} {
			if r != nil {
				r.Reject(nil)
			}
		}
		l.Close()
		for range 2 {
			if err := <-errs; !errors.As(err, new(*rdmacm.RejectError)) {
				t.Errorf("backlog %d: dial: %v, want a rejection", tc.backlog, err)
			}
		}
	}
}
