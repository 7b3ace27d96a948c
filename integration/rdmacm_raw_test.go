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
// delivered and not yet read: with Backlog 1, while one request is queued
// a second is dropped (the kernel does not reject it) and the requester's
// CM sends the REQ again after its timeout, 2×2^(lifetime−8) + 2^(20−8)
// ms on RoCE (6.1 s on 6.1, where cma.c's packet lifetime is 18,
// measured 6.2–6.4 s; 4.8–4.9 s measured on 6.12, as for a lifetime of
// 16), so it is seen only after the first was read; with Backlog 0 (the
// kernel's maximum) both are queued at once.
//
// The passive port's CM counters tell what happened, with no timing luck:
// a REQ for a request the kernel holds, sent again, counts as a duplicate
// (the CM answers it with the MRA it had delayed); a dropped REQ's cm_id is
// gone, so its resend counts as a new REQ. No fixed sleep stands in for
// "both REQs arrived": a Dial can send its REQ seconds late. The first
// address resolution towards a neighbour not yet in the ARP table takes
// its whole resolve timeout on 6.1 and 6.12 (3.1 s of a 3 s one, then
// 1 ms), so in a freshly booted VM one of the two dialers here sent its
// REQ 2 s after the other.
func TestCMListenBacklog(t *testing.T) {
	devs := devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i, tc := range []struct {
		backlog int
		queued  bool // the second request is queued with the first
	}{{backlog: 1}, {backlog: 0, queued: true}} {
		addr := netip.AddrPortFrom(cmAddr0, uint16(7685-i)).String()
		before := cmReqCounts(t, devs[0])
		l, err := rdmacm.Listen(ctx, addr, rdmacm.Options{Backlog: tc.backlog})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // on failure; Close is idempotent
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := rdmacm.Dial(ctx, addr, rdmacm.Options{Source: cmAddr1})
				errs <- err
			}()
		}
		// Backlog 1: nothing is read until the kernel has received three
		// new REQs from two dialers (one was dropped and sent again) and
		// a duplicate (the queued one, kept). Backlog 0: until both
		// arrived.
		want := cmReqs{fresh: 2}
		if !tc.queued {
			want = cmReqs{fresh: 3, dup: 1}
		}
		var got cmReqs
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got = cmReqCounts(t, devs[0]).sub(before)
			if got.fresh >= want.fresh && got.dup >= want.dup {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("backlog %d: %s's CM received %d new REQs and %d duplicates in 30 s, want %d and %d", tc.backlog, devs[0], got.fresh, got.dup, want.fresh, want.dup)
			}
		}
		if got.rej != 0 {
			t.Errorf("backlog %d: %s's CM sent %d REJs before any request was read, want none", tc.backlog, devs[0], got.rej)
		}
		select {
		case err := <-errs:
			t.Fatalf("backlog %d: a dial ended before any request was read: %v", tc.backlog, err)
		default:
		}
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
		first, _ := take(5 * time.Second)
		if first == nil {
			t.Fatalf("backlog %d: no request queued", tc.backlog)
		}
		// The dropped request comes with its next resend: at most one
		// REQ timeout after the first was read.
		second, took := take(20 * time.Second)
		if second == nil {
			t.Errorf("backlog %d: the second request never came", tc.backlog)
		}
		after := cmReqCounts(t, devs[0]).sub(before)
		t.Logf("backlog %d: REQs received before the first read: %d new, %d duplicates; the second request came %v after the first was read; %d new REQs in all",
			tc.backlog, got.fresh, got.dup, took.Round(time.Millisecond), after.fresh)
		if tc.queued && after.fresh != 2 {
			t.Errorf("backlog %d: %d new REQs for two dials, want 2 (none dropped and sent again)", tc.backlog, after.fresh)
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

// cmReqs counts REQs an RDMA port's CM received, and the REJs it sent.
// fresh are REQs for no cm_id it holds (new requests, and the resends of
// requests it dropped); dup are resends of requests it holds.
type cmReqs struct{ fresh, dup, rej uint64 }

func (c cmReqs) sub(o cmReqs) cmReqs {
	return cmReqs{fresh: c.fresh - o.fresh, dup: c.dup - o.dup, rej: c.rej - o.rej}
}

// cmReqCounts reads dev's port 1 ib_cm counters
// (/sys/class/infiniband/DEV/ports/1/cm_*): every REQ received is counted
// in cm_rx_msgs as it arrives, a duplicate also in cm_rx_duplicates.
func cmReqCounts(t *testing.T, dev string) cmReqs {
	t.Helper()
	read := func(name string) uint64 { return portCounter(t, dev, name) }
	all, dup := read("cm_rx_msgs/req"), read("cm_rx_duplicates/req")
	return cmReqs{fresh: all - dup, dup: dup, rej: read("cm_tx_msgs/rej")}
}
