//go:build integration

package integration

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/integration/rxetest"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
)

// removalNotice bounds how long after `rdma link delete` began a user of
// the device learns of it: the Context looks every PresenceInterval (0.5 s),
// TCG is slow.
const removalNotice = 10 * time.Second

// removalFinish bounds how long the delete takes once the users let go.
const removalFinish = 30 * time.Second

// startLinkDelete runs `rdma link delete dev` in the background.
func startLinkDelete(dev string) <-chan error {
	deleted := make(chan error, 1)
	go func() { deleted <- netlink.RdmaLinkDel(dev) }()
	return deleted
}

// waitDeleted fails the test unless the delete returns, without error,
// within limit.
func waitDeleted(t *testing.T, dev string, deleted <-chan error, start time.Time, limit time.Duration) {
	t.Helper()
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("rdma link delete %s: %v", dev, err)
		}
		t.Logf("rdma link delete %s returned %v after it began", dev, time.Since(start).Round(time.Millisecond))
	case <-time.After(limit):
		t.Fatalf("rdma link delete %s still blocked %v later", dev, limit)
	}
}

// checkRemoved fails unless err is the removal error naming dev.
func checkRemoved(t *testing.T, who string, err error, dev string) {
	t.Helper()
	if !errors.Is(err, uverbs.ErrDeviceRemoved) || !strings.Contains(err.Error(), dev) {
		t.Errorf("%s after rdma link delete %s: %v; want ErrDeviceRemoved naming %s", who, dev, err, dev)
	}
}

// rdma link delete under a Context with a completion channel waiter, an
// async event waiter and a poster: each gets the removal error naming the
// device (the kernel signals nothing on the fds: the Context sees the
// uverbs class device go), the refused posts and empty polls allocate
// nothing, the delete waits while the Context is open and completes once
// it is closed.
func TestDeviceRemovalWakesUsers(t *testing.T) {
	p := rxetest.Veth(t)
	dev := p.A.RDMA
	ctx := openDev(t, dev)
	closed := false
	defer func() {
		if !closed {
			ctx.Close()
		}
	}()
	ch, err := cq.NewChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, 16, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	q, err := qp.New(pd, qp.Spec{Type: qp.RC, SendCQ: c, RecvCQ: c, Cap: qp.Cap{MaxRecvWR: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	wc := make([]cq.WC, 4)
	if n, err := c.Poll(wc); n != 0 || err != nil {
		t.Fatalf("Poll of an idle CQ = %d, %v", n, err)
	}
	if a := testing.AllocsPerRun(100, func() { c.Poll(wc) }); a != 0 {
		t.Errorf("an empty Poll allocates %v times", a)
	}

	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := ch.GetEvent(wctx)
		waited <- err
	}()
	async := make(chan error, 1)
	go func() {
		for {
			ev, err := ctx.WaitAsyncEvent(wctx)
			if err != nil {
				async <- err
				return
			}
			t.Logf("async event: %v", ev)
		}
	}()
	posted := make(chan error, 1)
	go func() {
		wr := []qp.RecvWR{{ID: 1}}
		for {
			err := q.PostRecv(wr)
			if err != nil && !errors.Is(err, qp.ErrQueueFull) {
				posted <- err
				return
			}
			select {
			case <-wctx.Done():
				posted <- wctx.Err()
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	time.Sleep(100 * time.Millisecond) // the waiters are waiting
	if err := ctx.Err(); err != nil {
		t.Fatalf("Context.Err before the delete: %v", err)
	}

	start := time.Now()
	deleted := startLinkDelete(dev)
	for _, w := range []struct {
		who string
		ch  <-chan error
	}{{"Channel.GetEvent", waited}, {"WaitAsyncEvent", async}, {"PostRecv", posted}} {
		select {
		case err := <-w.ch:
			checkRemoved(t, w.who, err, dev)
			t.Logf("%s: %v after the delete began: %v", w.who, time.Since(start).Round(time.Millisecond), err)
		case <-time.After(removalNotice):
			t.Fatalf("%s not woken %v after rdma link delete %s", w.who, removalNotice, dev)
		}
	}
	checkRemoved(t, "Context.Err", ctx.Err(), dev)
	_, err = c.Poll(wc)
	checkRemoved(t, "Poll", err, dev)
	err = q.PostRecv([]qp.RecvWR{{ID: 2}})
	checkRemoved(t, "PostRecv", err, dev)
	if a := testing.AllocsPerRun(100, func() { c.Poll(wc); q.PostRecv([]qp.RecvWR{{ID: 2}}) }); a != 0 {
		t.Errorf("a refused Poll and PostRecv allocate %v times", a)
	}
	select {
	case err := <-deleted:
		t.Fatalf("rdma link delete returned (%v) with the Context open: rxe cannot disassociate; the test proves nothing", err)
	default:
	}
	if err := ctx.Close(); err != nil {
		t.Errorf("Context.Close after the removal: %v", err)
	}
	closed = true
	waitDeleted(t, dev, deleted, start, removalFinish)
}

// rdma link delete under a running rocev2-server that a rocev2-send
// streams to: the server exits non-zero with the device's name within
// removalNotice, and the delete completes.
func TestDeviceRemovalServer(t *testing.T) {
	p := rxetest.Veth(t)
	const port = 18690
	srv := startPeer(t, 3*time.Minute, "rocev2-server", "-d", p.A.RDMA, "-g", strconv.Itoa(p.A.GIDIndex), "-p", strconv.Itoa(port), "-q")
	waitListening(t, srv, port, 30*time.Second)
	recvs := hwCounter(t, p.A.RDMA, "rdma_recvs")
	startPeer(t, 3*time.Minute, "rocev2-send", "-d", p.B.RDMA, "-g", strconv.Itoa(p.B.GIDIndex), "-p", strconv.Itoa(port), "-n", "0", "-t", "2m", "-s", "1-4000", p.A.Addr.IP.String())
	waitCounterAbove(t, p.A.RDMA, "rdma_recvs", recvs+100, time.Minute)
	start := time.Now()
	deleted := startLinkDelete(p.A.RDMA)
	checkToolRemoved(t, srv, p.A.RDMA, start)
	waitDeleted(t, p.A.RDMA, deleted, start, removalFinish)
}

// rdma link delete under a running Go perftest server (ib_send_bw
// --run_infinitely, a Go client on the other device): the server exits
// non-zero naming the device, and the delete completes.
func TestDeviceRemovalPerftest(t *testing.T) {
	p := rxetest.Veth(t)
	port := 18600 + int(perftestPort.Add(1))
	args := []string{"--run_infinitely", "-D", "1", "-s", "1024"}
	s := startPerftest(t, perftestEnd{goTool: true}, "ib_send_bw", p.A.RDMA, port, args, "")
	waitListening(t, s, port, 30*time.Second)
	c := startPerftest(t, perftestEnd{goTool: true}, "ib_send_bw", p.B.RDMA, port, args, p.A.Addr.IP.String())
	deadline := time.Now().Add(2 * time.Minute)
	for len(perftestBWRow.FindAllString(s.out.String(), -1)) < 1 {
		select {
		case <-s.done:
			t.Fatalf("the server exited before the delete: %v\n%s", s.err, s.out.String())
		case <-c.done:
			t.Fatalf("the client exited before the delete: %v\n%s", c.err, c.out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server printed no row in 2 minutes:\n%s", s.out.String())
		}
	}
	start := time.Now()
	deleted := startLinkDelete(p.A.RDMA)
	checkToolRemoved(t, s, p.A.RDMA, start)
	waitDeleted(t, p.A.RDMA, deleted, start, removalFinish)
}

// checkToolRemoved waits up to removalNotice for a tool to exit after its
// device's delete began, and fails unless it exited non-zero with a
// message naming the device's removal.
func checkToolRemoved(t *testing.T, tool *peer, dev string, start time.Time) {
	t.Helper()
	select {
	case <-tool.done:
	case <-time.After(removalNotice):
		t.Fatalf("%s still running %v after rdma link delete %s:\n%s", tool.name, removalNotice, dev, tool.out.String())
	}
	out := tool.out.String()
	t.Logf("%s exited %v after the delete began: %v", tool.name, time.Since(start).Round(time.Millisecond), tool.err)
	if tool.err == nil {
		t.Errorf("%s exited 0 after its device was removed:\n%s", tool.name, out)
	}
	if !strings.Contains(out, "device "+dev+" removed") {
		t.Errorf("%s's output does not name the removal of %s:\n%s", tool.name, dev, out)
	}
}

// The netdev under an rxe device: set down, the device's port goes to
// error (an async PORT_ERR) and the device stays (no removal error); set up
// again it comes back. Deleted, rxe unregisters the device: PORT_ERR, then
// the removal error naming the device, and the netdev's deletion completes
// once the Context is closed.
func TestDeviceRemovalNetdev(t *testing.T) {
	p := rxetest.Veth(t)
	dev := p.A.RDMA
	ctx := openDev(t, dev)
	closed := false
	defer func() {
		if !closed {
			ctx.Close()
		}
	}()
	link, err := netlink.LinkByName(p.A.Netdev)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	next := func(what string) (uverbs.AsyncEvent, error) {
		t.Helper()
		c, cancel := context.WithTimeout(wctx, removalNotice)
		defer cancel()
		ev, err := ctx.WaitAsyncEvent(c)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: no async event in %v", what, removalNotice)
		}
		return ev, err
	}

	if err := netlink.LinkSetDown(link); err != nil {
		t.Fatal(err)
	}
	if ev, err := next("netdev down"); err != nil || ev.Type != uverbs.EventPortErr {
		t.Fatalf("netdev %s down: %v, %v; want PORT_ERR", p.A.Netdev, ev, err)
	}
	time.Sleep(3 * uverbs.PresenceInterval)
	if err := ctx.Err(); err != nil {
		t.Fatalf("netdev down (not deleted): Context.Err = %v, want nil: the device is still there", err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	if ev, err := next("netdev up"); err != nil || ev.Type != uverbs.EventPortActive {
		t.Fatalf("netdev %s up: %v, %v; want PORT_ACTIVE", p.A.Netdev, ev, err)
	}

	time.Sleep(time.Second) // the link's other events (a second PORT_ACTIVE, GID change)
	for {
		ev, err := ctx.ReadAsyncEvent()
		if err != nil {
			break
		}
		t.Logf("after netdev up: %v", ev)
	}

	start := time.Now()
	deleted := make(chan error, 1)
	go func() { deleted <- netlink.LinkDel(link) }()
	var seen []string
	for {
		ev, err := next("netdev delete")
		if err != nil {
			checkRemoved(t, "WaitAsyncEvent", err, dev)
			break
		}
		seen = append(seen, ev.String())
	}
	t.Logf("netdev %s delete: events %q, then the removal error %v after the delete began", p.A.Netdev, seen, time.Since(start).Round(time.Millisecond))
	select {
	case err := <-deleted:
		t.Logf("ip link del returned (%v) with the Context open", err)
	case <-time.After(time.Second):
		t.Log("ip link del blocks while the Context is open")
	}
	if err := ctx.Close(); err != nil {
		t.Errorf("Context.Close after the removal: %v", err)
	}
	closed = true
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("ip link del %s: %v", p.A.Netdev, err)
		}
	case <-time.After(removalFinish):
		t.Fatalf("ip link del %s still blocked %v after the Context closed", p.A.Netdev, removalFinish)
	}
	deadline := time.Now().Add(removalFinish)
	for rxelink.Exists(dev) {
		if time.Now().After(deadline) {
			t.Fatalf("rxe device %s still there %v after the Context closed", dev, removalFinish)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rdma link delete under the tools where they wait for a peer (a TCP
// accept, an RDMA CM request) or run a pingpong with completion events:
// each exits non-zero naming the device, and the delete completes.
func TestDeviceRemovalTools(t *testing.T) {
	cases := []struct {
		name  string
		start func(t *testing.T, p *rxetest.Pair, port int) *peer
	}{
		{"perftest server waiting", func(t *testing.T, p *rxetest.Pair, port int) *peer {
			s := startPerftest(t, perftestEnd{goTool: true}, "ib_send_bw", p.A.RDMA, port, nil, "")
			waitListening(t, s, port, 30*time.Second)
			return s
		}},
		{"rc-pingpong server waiting", func(t *testing.T, p *rxetest.Pair, port int) *peer {
			return startWaiting(t, port, "rc-pingpong", "-d", p.A.RDMA, "-g", strconv.Itoa(p.A.GIDIndex), "-p", strconv.Itoa(port))
		}},
		{"ud-pingpong server waiting", func(t *testing.T, p *rxetest.Pair, port int) *peer {
			return startWaiting(t, port, "ud-pingpong", "-d", p.A.RDMA, "-g", strconv.Itoa(p.A.GIDIndex), "-p", strconv.Itoa(port))
		}},
		{"srq-pingpong server waiting", func(t *testing.T, p *rxetest.Pair, port int) *peer {
			return startWaiting(t, port, "srq-pingpong", "-d", p.A.RDMA, "-g", strconv.Itoa(p.A.GIDIndex), "-p", strconv.Itoa(port))
		}},
		{"rc-pingpong running with events", func(t *testing.T, p *rxetest.Pair, port int) *peer {
			args := func(dev string, gid int) []string {
				return []string{"-d", dev, "-g", strconv.Itoa(gid), "-p", strconv.Itoa(port), "-e", "-n", "100000000", "-s", "64"}
			}
			s := startWaiting(t, port, "rc-pingpong", args(p.A.RDMA, p.A.GIDIndex)...)
			recvs := hwCounter(t, p.A.RDMA, "rdma_recvs")
			startPeer(t, 3*time.Minute, "rc-pingpong", append(args(p.B.RDMA, p.B.GIDIndex), p.A.Addr.IP.String())...)
			waitCounterAbove(t, p.A.RDMA, "rdma_recvs", recvs+100, time.Minute)
			return s
		}},
		{"rping server waiting", func(t *testing.T, p *rxetest.Pair, port int) *peer {
			s := startPeer(t, 3*time.Minute, "/usr/local/bin/rping", "-s", "-a"+p.A.Addr.IP.String(), "-p"+strconv.Itoa(port))
			waitCMListening(t, s, port, 30*time.Second)
			return s
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := rxetest.Veth(t)
			tool := tc.start(t, p, 18695+i)
			select {
			case <-tool.done:
				t.Fatalf("%s exited before the delete: %v\n%s", tool.name, tool.err, tool.out.String())
			default:
			}
			start := time.Now()
			deleted := startLinkDelete(p.A.RDMA)
			checkToolRemoved(t, tool, p.A.RDMA, start)
			waitDeleted(t, p.A.RDMA, deleted, start, removalFinish)
		})
	}
}

// startWaiting starts a tool that listens on TCP port and waits until it
// does.
func startWaiting(t *testing.T, port int, name string, args ...string) *peer {
	t.Helper()
	s := startPeer(t, 3*time.Minute, name, args...)
	waitListening(t, s, port, 30*time.Second)
	return s
}
