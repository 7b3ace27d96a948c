//go:build integration

package integration

import (
	"maps"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/server"
	"github.com/vishvananda/netlink"
)

// rdmaResources is the kernel's resource summary of dev (`rdma resource`:
// RDMA_NLDEV_CMD_RES_GET over netlink): pd, cq, qp, mr, ctx, ... counts.
func rdmaResources(t *testing.T, dev string) map[string]uint64 {
	t.Helper()
	all, err := netlink.RdmaResourceList()
	if err != nil {
		t.Fatalf("rdma resource: %v", err)
	}
	for _, r := range all {
		if r.Name == dev {
			return r.RdmaResourceSummaryEntries
		}
	}
	t.Fatalf("rdma resource: no %s in %d devices", dev, len(all))
	return nil
}

// waitResources waits until dev's resource counts equal want.
func waitResources(t *testing.T, dev string, want map[string]uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := rdmaResources(t, dev)
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s resources %v, want the baseline %v", dev, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitCounterAbove waits until an rxe hardware counter exceeds n.
func waitCounterAbove(t *testing.T, dev, name string, n uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for hwCounter(t, dev, name) <= n {
		if time.Now().After(deadline) {
			t.Fatalf("%s %s stayed at or below %d for %v", dev, name, n, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

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
	r := newRXServer(t, nil)
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

// TestServerSoakMemory streams 10⁶ frames through the in-process server and
// samples the heap (after a GC) and the process's RSS every 50 000 frames:
// after a warm-up of 100 000 frames neither may grow by more than 10 % and
// 2 MiB. Only with RXEVM_SOAK=1 (make soak-server).
func TestServerSoakMemory(t *testing.T) {
	if os.Getenv("RXEVM_SOAK") != "1" {
		t.Skip("soak: runs with RXEVM_SOAK=1 (make soak-server)")
	}
	const total, every, warm = 1000000, 50000, 100000
	r := newRXServer(t, nil)
	snd := startPeer(t, 60*time.Minute, "rocev2-send", r.sendArgs("-n", strconv.Itoa(total), "-s", "1-9000", "-c", "8")...)
	var heap, rss []uint64
	var lines []string
	for n := uint64(every); n <= total; n += every {
		r.waitFrames(n, 10*time.Minute)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rs := vmRSS(t)
		lines = append(lines, "| "+strconv.FormatUint(n, 10)+" | "+strconv.FormatUint(ms.HeapAlloc>>10, 10)+" | "+strconv.FormatUint(ms.HeapSys>>10, 10)+" | "+strconv.FormatUint(rs>>10, 10)+" |")
		if n >= warm {
			heap, rss = append(heap, ms.HeapAlloc), append(rss, rs)
		}
	}
	snd.wait(t)
	t.Logf("\n| frames | heap alloc KiB | heap sys KiB | RSS KiB |\n|---|---|---|---|\n%s", strings.Join(lines, "\n"))
	for _, s := range []struct {
		name string
		v    []uint64
	}{{"heap", heap}, {"RSS", rss}} {
		limit := s.v[0] + s.v[0]/10 + 2<<20
		for i, v := range s.v {
			if v > limit {
				t.Errorf("%s grew after the warm-up: %d B at sample %d, %d B at %d frames", s.name, v, i, s.v[0], warm)
			}
		}
	}
	c := r.checker(0)
	c.Expect(total)
	if c.Frames != total || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 {
		t.Errorf("checker %+v", c)
	}
}

// vmRSS is this process's resident set size from /proc/self/status.
func vmRSS(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
