//go:build integration

package integration

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/integration/rxetest"
	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
)

// envLeakDemo makes TestRxetestLeakedContext the child that leaks.
const envLeakDemo = "RXETEST_LEAK_DEMO"

// leakedContexts keeps the child's Context reachable, so no collector's
// clean-up closes it for the test.
var leakedContexts []*uverbs.Context

// A user's test that forgets to close its Context on an rxetest pair fails,
// with a message naming this process's fd and the device, its clean-up
// returning within 30 s (at once, in fact),
// instead of hanging in the kernel's link deletion. The test runs itself
// as the leaking child (RXETEST_LEAK_DEMO=1); afterwards, with the child
// gone, the link it had to leave behind deletes normally. (Seen in the VM
// on 6.1: the child fails after 2.7 s naming "pid N (integration.tes): fd
// 3" on /dev/infiniband/uverbs2.)
func TestRxetestLeakedContext(t *testing.T) {
	if os.Getenv(envLeakDemo) == "1" {
		// Clean-ups run last-registered first: this one runs after
		// rxetest's, the one registered after Veth before it.
		var cleanupStart time.Time
		t.Cleanup(func() { t.Logf("rxetest's clean-up returned after %v", time.Since(cleanupStart)) })
		p := rxetest.Veth(t)
		t.Cleanup(func() { cleanupStart = time.Now() })
		dev, err := uverbs.DeviceByName(p.A.RDMA)
		if err != nil {
			t.Fatal(err)
		}
		ctx, err := uverbs.Open(dev)
		if err != nil {
			t.Fatal(err)
		}
		leakedContexts = append(leakedContexts, ctx) // not closed, on purpose
		return
	}
	before, err := rxelink.List()
	if err != nil {
		t.Fatal(err)
	}
	// For the whole child (its start-up and rxetest.Veth took 69 s on a
	// loaded arm64 TCG guest); its clean-up must return within cleanupBound.
	const bound, cleanupBound = 5 * time.Minute, 30 * time.Second
	cmd := exec.Command(os.Args[0], "-test.run=^TestRxetestLeakedContext$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envLeakDemo+"=1")
	var buf lockedBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Not CommandContext: a child stuck in the kernel's link deletion
	// cannot be killed (its fds close only when that call returns), so
	// waiting for it would hang this test too.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(bound):
		cmd.Process.Kill()
		t.Fatalf("the leaking test did not end within %v (hung in the link deletion?):\n%s", bound, buf.String())
	}
	took, out := time.Since(start), buf.String()
	if err == nil {
		t.Errorf("the leaking test passed:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestRxetestLeakedContext", "rxetest: the test left a uverbs Context",
		"/dev/infiniband/uverbs", "is still open (this process, pid", "fd ", "close every uverbs Context"} {
		if !strings.Contains(out, want) {
			t.Errorf("the leaking test's output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("the leaking test failed after %v:\n%s", took.Round(time.Millisecond), out)
	if _, after, ok := strings.Cut(out, "rxetest's clean-up returned after "); !ok {
		t.Errorf("the child did not log its clean-up's time")
	} else if d, err := time.ParseDuration(strings.Fields(after)[0]); err != nil || d > cleanupBound {
		t.Errorf("rxetest's clean-up of a held link returned after %q, want within %v", strings.Fields(after)[0], cleanupBound)
	}

	// Left in place by the child; with its process gone, nothing holds them.
	after, err := rxelink.List()
	if err != nil {
		t.Fatal(err)
	}
	var left []rxelink.Link
	for _, l := range after {
		if !slices.Contains(before, l) {
			left = append(left, l)
		}
	}
	// The link under the leaked Context stays; its pair's other, unheld,
	// link was removed.
	if len(left) != 1 || !strings.HasSuffix(left[0].Name, "a") {
		t.Errorf("links the child left: %v, want the one under its Context (its pair's A)", left)
	}
	for _, l := range left {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := rxelink.Delete(dctx, l.Name); err != nil {
			t.Errorf("delete %s after the child exited: %v", l.Name, err)
		}
		dcancel()
		if nl, err := netlink.LinkByName(l.Netdev); err == nil {
			netlink.LinkDel(nl)
		}
	}
}
