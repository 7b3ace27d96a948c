//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
)

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
	return startPeerWith(t, limit, nil, name, args...)
}

// startPeerWith is startPeer with edit, if set, adjusting the command
// (its environment, say) before it starts.
func startPeerWith(t testing.TB, limit time.Duration, edit func(*exec.Cmd), name string, args ...string) *peer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	p := &peer{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, name, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if edit != nil {
		edit(p.cmd)
	}
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
	waitListen(t, srv, fmt.Sprintf("port %d", port), limit, func() (bool, error) { return topology.Listening(port) })
}

// waitCMListening waits until an RDMA CM ID listens on port
// (topology.CMListening: the kernel's resource dump, so no probe
// connection for srv to take as its client), or fails if srv exits first.
func waitCMListening(t testing.TB, srv *peer, port int, limit time.Duration) {
	t.Helper()
	waitListen(t, srv, fmt.Sprintf("RDMA CM port %d", port), limit, func() (bool, error) { return topology.CMListening(port, netip.Addr{}) })
}

// waitListen polls listening until it reports true, failing if srv exits
// first or limit passes; where names what srv is to listen on.
func waitListen(t testing.TB, srv *peer, where string, limit time.Duration, listening func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, err := listening()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		select {
		case <-srv.done:
			t.Fatalf("%s exited before listening on %s: %v\n%s", srv.name, where, srv.err, srv.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s after %v:\n%s", srv.name, where, limit, srv.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runPeer runs a program to completion within limit and returns its output.
func runPeer(t testing.TB, limit time.Duration, name string, args ...string) string {
	t.Helper()
	return startPeer(t, limit, name, args...).wait(t)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
