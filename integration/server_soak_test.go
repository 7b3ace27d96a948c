//go:build integration

package integration

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/server"
)

// soakSample is the process's resource use at one point of the soak.
type soakSample struct {
	frames     uint64
	at         time.Duration // since the stream started
	heapAlloc  uint64        // live heap after a GC
	heapSys    uint64
	rss        uint64
	mallocs    uint64 // cumulative heap allocations
	goroutines int
	fds        int
}

func takeSoakSample(t *testing.T, frames uint64, at time.Duration) soakSample {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return soakSample{frames: frames, at: at, heapAlloc: ms.HeapAlloc, heapSys: ms.HeapSys, rss: vmRSS(t),
		mallocs: ms.Mallocs, goroutines: runtime.NumGoroutine(), fds: openFDs(t)}
}

func (s soakSample) row() string {
	return fmt.Sprintf("| %d | %.0f | %d | %d | %d | %d | %d | %d |", s.frames, s.at.Seconds(),
		s.heapAlloc>>10, s.heapSys>>10, s.rss>>10, s.mallocs, s.goroutines, s.fds)
}

const soakHeader = "| frames | s | heap live KiB | heap sys KiB | RSS KiB | mallocs | goroutines | fds |\n|---|---|---|---|---|---|---|---|"

// TestServerSoakMemory streams 10⁶ frames from one sender through the
// in-process server (the rig's Handler checks every payload) and samples
// the process every 50 000 frames: live heap after a GC, RSS, allocations,
// goroutines and open descriptors. After a warm-up of 100 000 frames the
// heap and RSS may not grow by more than 10 % + 2 MiB, allocations stay
// under 0.01 per frame (the samples' own included), goroutines and
// descriptors stay where they were.
// Every frame arrives once, in order, intact, with no ring gap, and when
// the sender leaves every slot is back (posted + held == depth, nothing
// downstream). Then 15 more senders of 1 000 frames each connect one after
// the other: after each one's connection ended, goroutines, descriptors
// and rxe0's kernel resources (QPs, CQs, MRs ...) are what they were
// after the first. Only with RXEVM_SOAK=1 (make soak-server).
func TestServerSoakMemory(t *testing.T) {
	if os.Getenv("RXEVM_SOAK") != "1" {
		t.Skip("soak: runs with RXEVM_SOAK=1 (make soak-server)")
	}
	const total, every, warm = 1000000, 50000, 100000
	const senders, each = 15, 1000
	devs := devices(t, 2)
	r := newRXServer(t)
	start := time.Now()
	// 1..1024-byte frames (one packet at the 1024-byte path MTU) and a
	// 64-deep send queue signalled every 8th: the rate a loaded TCG VM
	// gives 10⁶ frames in minutes, not hours; the server's memory does not
	// depend on the payload sizes (the slab is off-heap and fixed).
	snd := startPeer(t, 60*time.Minute, "rocev2-send", r.sendArgs("-n", strconv.Itoa(total), "-s", "1-1024", "-c", "8",
		"-w", "100000", "-q", "64", "-signal", "8")...)
	var samples []soakSample
	rows := []string{takeSoakSample(t, 0, 0).row()}
	for n := uint64(every); n <= total; n += every {
		waitHandled(t, r, snd, n, 10*time.Minute)
		s := takeSoakSample(t, n, time.Since(start))
		rows = append(rows, s.row())
		t.Logf("soak %s", s.row())
		if n >= warm {
			samples = append(samples, s)
		}
	}
	out := snd.wait(t)
	el := time.Since(start)
	st := r.waitStats(time.Minute, "the sender's connection to end", func(s *server.Stats) bool { return s.SessionEnds == 1 })
	t.Logf("%d frames, %d bytes in %v (%.0f frames/s); sender: %s\n%s\n%s", st.Frames, st.Bytes, el.Round(time.Second),
		float64(st.Frames)/el.Seconds(), lastLine(out), soakHeader, strings.Join(rows, "\n"))

	first, last := samples[0], samples[len(samples)-1]
	for _, s := range samples {
		if lim := first.heapAlloc + first.heapAlloc/10 + 2<<20; s.heapAlloc > lim {
			t.Errorf("live heap grew after the warm-up: %d B at %d frames, %d B at %d", s.heapAlloc, s.frames, first.heapAlloc, first.frames)
		}
		if lim := first.rss + first.rss/10 + 2<<20; s.rss > lim {
			t.Errorf("RSS grew after the warm-up: %d B at %d frames, %d B at %d", s.rss, s.frames, first.rss, first.frames)
		}
		if s.goroutines > first.goroutines || s.fds > first.fds {
			t.Errorf("at %d frames %d goroutines, %d fds; at %d frames %d, %d", s.frames, s.goroutines, s.fds, first.frames, first.goroutines, first.fds)
		}
	}
	perFrame := float64(last.mallocs-first.mallocs) / float64(last.frames-first.frames)
	growth := (float64(last.heapAlloc) - float64(first.heapAlloc)) / float64(last.frames-first.frames)
	t.Logf("after the warm-up: %.4f allocations per frame, live heap %+.3f B per frame, RSS %+d KiB over %d frames",
		perFrame, growth, (int64(last.rss)-int64(first.rss))>>10, last.frames-first.frames)
	if perFrame > 0.01 {
		t.Errorf("%.4f allocations per frame in the steady state", perFrame)
	}
	c := r.checker(0)
	c.Expect(total)
	if c.Frames != total || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 || r.bad.Load() != 0 {
		t.Errorf("checker %+v, invariant violations %d", c, r.bad.Load())
	}
	if st.Frames != total || st.Ring.Gaps != 0 || st.Ring.Duplicates != 0 || st.Ring.Wraps != total/100000-1 {
		t.Errorf("server: %d frames, ring %+v (want no gap, %d wraps)", st.Frames, st.Ring, total/100000-1)
	}
	if st.Posted+st.Held != r.srv.Depth() || st.Downstream != 0 || st.StaleReleases != 0 {
		t.Errorf("after the sender left: posted %d held %d downstream %d stale releases %d", st.Posted, st.Held, st.Downstream, st.StaleReleases)
	}

	// Connections come and go: each leaves nothing behind.
	time.Sleep(500 * time.Millisecond) // the side channel's goroutine of that sender returns
	base := waitSettled(t, -1, -1, nil, devs[0])
	for k := 1; k <= senders; k++ {
		r.send(5*time.Minute, "-n", strconv.Itoa(each), "-s", "1-9000", "-C", strconv.Itoa(16*k))
		r.waitStats(time.Minute, fmt.Sprintf("sender %d's connection to end", k), func(s *server.Stats) bool { return s.SessionEnds == uint64(1+k) })
		waitSettled(t, base.goroutines, base.fds, base.resources, devs[0])
		if c := r.checker(k); c.Frames != each || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 {
			t.Errorf("sender %d: checker %+v", k, c)
		}
	}
	if st := r.srv.Stats(); st.Posted+st.Held != r.srv.Depth() || st.Downstream != 0 || st.Sessions != 1+senders {
		t.Errorf("after %d more senders: posted %d held %d downstream %d sessions %d", senders, st.Posted, st.Held, st.Downstream, st.Sessions)
	}
	t.Logf("%d more senders of %d frames: each left %d goroutines, %d fds and %v on %s", senders, each, base.goroutines, base.fds, base.resources, devs[0])
}

// waitHandled waits until the rig's Handler saw n frames, allocating
// nothing while it waits (r.waitFrames takes a Stats snapshot per poll),
// so that the allocations counted are the server's and the samples'. It
// gives up after limit, or 30 s after the sender exited, saying where the
// slots are and what the sender printed.
func waitHandled(t *testing.T, r *rxServer, snd *peer, n uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	exited := false
	for r.n.Load() < n {
		if !exited {
			select {
			case <-snd.done:
				exited = true
				if grace := time.Now().Add(30 * time.Second); grace.Before(deadline) {
					deadline = grace
				}
			default:
			}
		}
		if time.Now().After(deadline) {
			st := r.srv.Stats()
			t.Fatalf("%d of %d frames (sender exited: %v); server: posted %d held %d downstream %d low-water %d, errors %v, bad opcode %d length %d wr_id %d, parks %d, sessions %d/%d\nsender: %s\nlog:\n%s",
				r.n.Load(), n, exited, st.Posted, st.Held, st.Downstream, st.PostedLowMark, st.Errors, st.BadOpcode, st.BadLength, st.BadWRID,
				st.Parks, st.Sessions, st.SessionEnds, snd.out.String(), r.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settled is what a server between connections holds.
type settled struct {
	goroutines, fds int
	resources       map[string]uint64
}

// waitSettled waits (10 s at most) until the process has at most
// goroutines goroutines and fds descriptors and dev's kernel resources
// equal resources (each check skipped when negative or nil), and returns
// what it has then.
func waitSettled(t *testing.T, goroutines, fds int, resources map[string]uint64, dev string) settled {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := settled{runtime.NumGoroutine(), openFDs(t), rdmaResources(t, dev)}
		ok := (goroutines < 0 || s.goroutines <= goroutines) && (fds < 0 || s.fds <= fds)
		if resources != nil {
			for k, v := range resources {
				ok = ok && s.resources[k] == v
			}
			ok = ok && len(s.resources) == len(resources)
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("between connections: %d goroutines, %d fds, %s %v; want at most %d, %d and %v", s.goroutines, s.fds, dev, s.resources, goroutines, fds, resources)
		}
		time.Sleep(20 * time.Millisecond)
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
