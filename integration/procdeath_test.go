//go:build integration

package integration

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/server"
)

// TestKilledServerLeavesNothing SIGKILLs a rocev2-server process mid-stream
// while it holds a context, PD, MR over its mapped slab, CQ, QP and frames
// (-hold keeps each for 20 ms): rxe0's resource counts go back to what they
// were before it started, the sender's QP fails instead of hanging, and a
// new server process on the same port takes a new sender's stream.
func TestKilledServerLeavesNothing(t *testing.T) {
	devs := devices(t, 2)
	base0, base1 := rdmaResources(t, devs[0]), rdmaResources(t, devs[1])
	const port = 18680
	srv := startPeer(t, 5*time.Minute, "rocev2-server", "-d", devs[0], "-g", gidArg(t, devs[0]), "-p", strconv.Itoa(port), "-hold", "20ms", "-q")
	waitListening(t, srv, port, 30*time.Second)
	recvs := hwCounter(t, devs[0], "rdma_recvs")
	snd := startPeer(t, 5*time.Minute, "rocev2-send", "-d", devs[1], "-g", gidArg(t, devs[1]), "-p", strconv.Itoa(port), "-n", "0", "-t", "4m", "-s", "1-9000", "10.99.0.1")
	waitCounterAbove(t, devs[0], "rdma_recvs", recvs+500, time.Minute)
	held := rdmaResources(t, devs[0])
	if held["qp"] <= base0["qp"] || held["mr"] <= base0["mr"] || held["cq"] <= base0["cq"] {
		t.Fatalf("rocev2-server holds no QP, MR or CQ: %v (baseline %v)", held, base0)
	}
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-srv.done
	waitResources(t, devs[0], base0, 30*time.Second)
	// The sender's requests now reach a QP number nobody has: its
	// retries run out and it exits with an error rather than hanging.
	<-snd.done
	if snd.err == nil || !strings.Contains(snd.out.String(), "completion error") {
		t.Errorf("sender after the server was killed: %v\n%s", snd.err, snd.out.String())
	}
	waitResources(t, devs[1], base1, 30*time.Second)
	t.Logf("rocev2-server held %v on %s; after SIGKILL back to %v; sender: %s", held, devs[0], base0, lastLine(snd.out.String()))

	srv2 := startPeer(t, 5*time.Minute, "rocev2-server", "-d", devs[0], "-g", gidArg(t, devs[0]), "-p", strconv.Itoa(port), "-n", "2000", "-check", "-q")
	waitListening(t, srv2, port, 30*time.Second)
	runPeer(t, 3*time.Minute, "rocev2-send", "-d", devs[1], "-g", gidArg(t, devs[1]), "-p", strconv.Itoa(port), "-n", "2000", "-s", "1-9000", "10.99.0.1")
	out := srv2.wait(t)
	if !strings.Contains(out, "0 lost, 0 corrupt") {
		t.Errorf("the new server's summary:\n%s", out)
	}
	waitResources(t, devs[0], base0, 30*time.Second)
}

// TestKilledSenderLeavesNothing SIGKILLs a rocev2-send process mid-stream
// while it holds its QP, MR, mapped buffer and posted sends: rxe1's
// resource counts go back to the baseline, the in-process server ends that
// session, and a new sender is served without restarting the server.
func TestKilledSenderLeavesNothing(t *testing.T) {
	devs := devices(t, 2)
	base1 := rdmaResources(t, devs[1])
	r := newRXServer(t)
	snd := startPeer(t, 5*time.Minute, "rocev2-send", r.sendArgs("-n", "0", "-t", "4m", "-s", "1-9000", "-C", "0")...)
	r.waitFrames(500, time.Minute)
	if held := rdmaResources(t, devs[1]); held["qp"] <= base1["qp"] || held["mr"] <= base1["mr"] {
		t.Fatalf("rocev2-send holds no QP or MR: %v (baseline %v)", held, base1)
	}
	if err := snd.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-snd.done
	waitResources(t, devs[1], base1, 30*time.Second)
	r.waitStats(30*time.Second, "the killed sender's session to end", func(s *server.Stats) bool { return s.SessionEnds == 1 })
	first := r.checker(0)
	if first.Lost != 0 || first.Corrupt != 0 || first.Duplicate != 0 {
		t.Errorf("the killed sender's frames: %+v", first)
	}
	r.send(3*time.Minute, "-n", "2000", "-s", "1-9000", "-C", "16")
	st := r.waitStats(time.Minute, "the new sender's frames", func(s *server.Stats) bool { return s.ChannelFrames[16] >= 2000 })
	if b := r.checker(1); b.Frames != 2000 || b.Lost != 0 || b.Corrupt != 0 || st.Sessions != 2 {
		t.Errorf("new sender: checker %+v, sessions %d", b, st.Sessions)
	}
	waitResources(t, devs[1], base1, 30*time.Second)
}

// TestSenderReconnectsToRestartedServer: the rocev2-server process a
// rocev2-send -reconnect streams to is SIGKILLed and a new one started on
// the same port. The sender's QP fails, it reconnects (retrying while
// nobody listens) and finishes the stream with exit status 0; the new
// server's first frame is the one the sender went on with, so what it
// reports lost (-check) is exactly the frames before it: those the first
// server had, and those the sender reported unacknowledged.
//
// Not on arm64 with 6.1: under its TCG the ACK timeouts fire on every
// stream, and 6.1's rxe then fails requests it has half seen
// (retransmitWatch), which here is a second failed connection or a frame
// the new server finds corrupt (3 of 3 runs on 2026-12-07). The amd64
// suites run it on 6.1 and 6.12.
func TestSenderReconnectsToRestartedServer(t *testing.T) {
	if runtime.GOARCH == "arm64" && !kernelAtLeast(t, 6, 2) {
		t.Skip("rxe 6.1 under arm64's TCG fails retransmitted requests (retransmitWatch); the amd64 suites run this test")
	}
	const port, total = 18741, 4000
	devs := devices(t, 2)
	srvArgs := []string{"-d", devs[0], "-g", gidArg(t, devs[0]), "-p", strconv.Itoa(port), "-q"}
	first := startPeer(t, 5*time.Minute, "rocev2-server", srvArgs...)
	waitListening(t, first, port, 30*time.Second)
	recvs := hwCounter(t, devs[0], "rdma_recvs")
	snd := startPeer(t, 10*time.Minute, "rocev2-send", "-d", devs[1], "-g", gidArg(t, devs[1]), "-p", strconv.Itoa(port),
		"-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4", "-reconnect", "60", "10.99.0.1")
	waitCounterAbove(t, devs[0], "rdma_recvs", recvs+1000, 2*time.Minute)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	second := startPeer(t, 10*time.Minute, "rocev2-server", append(srvArgs, "-check", "-once")...)
	out := snd.wait(t)
	fails := abandoned(t, out)
	if len(fails) != 1 {
		t.Fatalf("want one failed connection, got %v:\n%s", fails, out)
	}
	<-second.done
	srvOut := second.out.String()
	// The second server saw frames next.. only, each once: it counts the
	// ones before as lost (and so exits 1).
	next := fails[0][1] + 1
	want := fmt.Sprintf("frames %d,", total-next)
	if !strings.Contains(srvOut, want) || !strings.Contains(srvOut, fmt.Sprintf("%d lost, 0 corrupt\nlost frames: 0..%d\n", next, next-1)) || !strings.Contains(srvOut, " 0 gaps") {
		t.Errorf("the new server (want %q and %d lost):\n%s\nsender:\n%s", want, next, srvOut, out)
	}
	t.Logf("sender: %s\nnew server: %s", strings.Join(strings.Split(strings.TrimSpace(out), "\n")[1:], " / "), strings.ReplaceAll(strings.TrimSpace(srvOut), "\n", " / "))
}
