//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// devices returns the rxe devices the harness created (RXEVM_DEVICES), and
// fails the test when there are fewer than want: an integration test never
// silently skips inside the VM.
func devices(t testing.TB, want int) []string {
	t.Helper()
	devs := strings.Fields(os.Getenv("RXEVM_DEVICES"))
	if len(devs) == 0 {
		devs = []string{"rxe0", "rxe1"} // make test-host builds the veth layout
	}
	if len(devs) < want {
		t.Fatalf("this test needs %d rxe devices, the topology has %v", want, devs)
	}
	return devs
}

// gidIndex returns the index of dev's RoCE v2 GID of its IPv4 address as
// the harness found it (RXEVM_GID_INDEXES, in RXEVM_DEVICES' order), or, on
// a machine set up otherwise, as dev's GID table shows it now. A fresh
// link's table fills in no fixed order: never assume index 1.
func gidIndex(t testing.TB, dev string) int {
	t.Helper()
	devs, idxs := strings.Fields(os.Getenv("RXEVM_DEVICES")), strings.Fields(os.Getenv("RXEVM_GID_INDEXES"))
	for i, d := range devs {
		if d == dev && i < len(idxs) {
			n, err := strconv.Atoi(idxs[i])
			if err != nil {
				t.Fatalf("RXEVM_GID_INDEXES=%q: %v", os.Getenv("RXEVM_GID_INDEXES"), err)
			}
			return n
		}
	}
	gids, err := rxelink.GIDs(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gids {
		if g.Type == uverbs.GIDTypeRoCEv2 && g.GID.Addr().Unmap().Is4() {
			return g.Index
		}
	}
	t.Fatalf("%s has no RoCE v2 GID of an IPv4 address: %v", dev, gids)
	return 0
}

// gidArg is gidIndex as a C tool's -g/-x argument.
func gidArg(t testing.TB, dev string) string {
	t.Helper()
	return strconv.Itoa(gidIndex(t, dev))
}

// kernelAtLeast reports whether the running kernel is major.minor or newer.
func kernelAtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", u.Release[:], err)
	}
	return ma > major || (ma == major && mi >= minor)
}

// peer is a program run inside the VM with a hard deadline: a broken rxe
// path hangs rather than fails, so nothing is started without one.
type peer struct {
	name string
	cmd  *exec.Cmd
	out  lockedBuffer
	done chan struct{}
	err  error
	// cancel ends the peer before its deadline (perftest ends only).
	cancel context.CancelFunc
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startPeer starts name with args, killed after limit or at test cleanup.
func startPeer(t testing.TB, limit time.Duration, name string, args ...string) *peer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	p := &peer{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, name, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		if ctx.Err() != nil {
			p.err = ctx.Err()
		}
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
	})
	return p
}

// wait returns the peer's output once it exits, failing the test when it
// exited non-zero or ran out of time.
func (p *peer) wait(t testing.TB) string {
	t.Helper()
	<-p.done
	out := p.out.String()
	if p.err != nil {
		t.Fatalf("%s %s: %v\n%s", p.name, strings.Join(p.cmd.Args[1:], " "), p.err, out)
	}
	return out
}

// waitListening waits until srv listens on TCP port (topology.Listening, so that
// no probe connection is made: the pingpong servers would take it for their
// client), or fails if srv exits first.
func waitListening(t testing.TB, srv *peer, port int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, err := topology.Listening(port)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		select {
		case <-srv.done:
			t.Fatalf("%s exited before listening on %d: %v\n%s", srv.name, port, srv.err, srv.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on port %d after %v:\n%s", srv.name, port, limit, srv.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runPeer runs a program to completion within limit and returns its output.
func runPeer(t testing.TB, limit time.Duration, name string, args ...string) string {
	t.Helper()
	return startPeer(t, limit, name, args...).wait(t)
}

// TestHarnessSelfcheck fails on purpose when RXEVM_SELFCHECK=1, so that
// `make itest-selfcheck` can prove a failing test fails the whole run.
func TestHarnessSelfcheck(t *testing.T) {
	if os.Getenv("RXEVM_SELFCHECK") != "1" {
		t.Skip("runs only under make itest-selfcheck (RXEVM_SELFCHECK=1)")
	}
	t.Fatal("deliberate failure seen by the harness")
}
