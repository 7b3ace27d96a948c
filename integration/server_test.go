//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/server/framecheck"
)

// TestServerStream streams 50 000 frames (10 000 on arm64, see tcgFrames)
// of 1..9000 bytes (most of them several packets at the 1024-byte path MTU)
// on four channels: none lost, duplicated or corrupt, no ring gaps,
// posted + held == depth, and few allocations per frame. A stream that 6.1's
// rxe breaks on a retransmission (retransmitWatch: the sender's
// REM_OP_ERR or REM_INV_REQ_ERR after ACK timeouts) runs once more on a
// new server; any other failure, or the same one twice, fails the test.
func TestServerStream(t *testing.T) {
	total := tcgFrames(50000, 10000)
	if testing.Short() {
		total = 5000
	}
	devs := devices(t, 2)
	var (
		r        *rxServer
		ms0, ms1 runtime.MemStats
		frames0  uint64    // frames received when ms0 was read
		warmed   time.Time // when ms0 was read
		start    time.Time
		out      string
	)
	for try := 0; ; try++ {
		r = newRXServer(t)
		w := watchRetransmits(t)
		dup0 := hwCounter(t, devs[0], "duplicate_request")
		start = time.Now()
		p := r.startSend(10*time.Minute, "-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4")
		// Allocations count from a tenth of the stream on: the connection's
		// set-up (side channel, session) allocates the same for any length
		// of stream, and on arm64's 10 000 frames it alone came near the
		// limit (551 in all, 0.055 a frame, on a slow day).
	warm:
		for r.srv.Stats().Frames < uint64(total/10) {
			select {
			case <-p.done:
				break warm
			case <-time.After(5 * time.Millisecond):
			}
		}
		runtime.ReadMemStats(&ms0)
		frames0, warmed = r.srv.Stats().Frames, time.Now()
		<-p.done
		out = p.out.String()
		timeouts, dups := w.retryTimeouts(t)-w.retries, hwCounter(t, devs[0], "duplicate_request")-dup0
		if p.err == nil {
			t.Logf("sender's ACK timeouts %d, duplicate requests at the server %d", timeouts, dups)
			break
		}
		st := r.srv.Stats()
		if why, ok := w.refused(t, out); ok && try == 0 {
			t.Logf("%s; duplicate requests at the server %d, its completion errors %v after %d frames; streaming again:\n%s",
				why, dups, st.Errors, st.Frames, strings.TrimSpace(out))
			r.close()
			continue
		}
		t.Fatalf("rocev2-send: %v (ACK timeouts %d, duplicate requests at the server %d; server: frames %d, completion errors %v)\n%s",
			p.err, timeouts, dups, st.Frames, st.Errors, out)
	}
	r.waitFrames(uint64(total), time.Minute)
	el := time.Since(start)
	runtime.ReadMemStats(&ms1)
	secs := time.Since(warmed).Seconds()
	st := r.waitStats(30*time.Second, "the sender's connection to end", func(s *server.Stats) bool { return s.SessionEnds == 1 })
	t.Logf("%d frames, %d bytes in %v (%.0f frames/s); sender: %s", st.Frames, st.Bytes, el.Round(time.Millisecond),
		float64(st.Frames)/el.Seconds(), strings.TrimSpace(out))
	// The process allocates about 11 times a second whatever the stream
	// does (solved from two runs: 665 in 45 000 frames and 60 s on amd64,
	// 495 in 9 000 frames and 45 s on arm64, so about none per frame).
	// The limit allows that, plus 0.05 a frame: a frame that allocated
	// once would exceed it on amd64 ten times over.
	n := uint64(total) - frames0
	allocs := ms1.Mallocs - ms0.Mallocs
	t.Logf("process-wide allocations: %d over the last %d frames and %.1f s, test harness included", allocs, n, secs)
	if limit := 0.05*float64(n) + 20*secs; float64(allocs) > limit {
		t.Errorf("%d allocations over %d frames and %.1f s, want at most %.0f", allocs, n, secs, limit)
	}
	if st.Frames != uint64(total) {
		t.Errorf("%d frames, want %d", st.Frames, total)
	}
	c := r.checker(0)
	c.Expect(uint64(total))
	if c.Frames != uint64(total) || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 {
		t.Errorf("checker: %+v", c)
	}
	for ch := range 4 {
		if st.ChannelFrames[ch] != uint64(total/4) || st.ChannelRing[ch].Gaps != 0 {
			t.Errorf("channel %d: %d frames, %d gaps", ch, st.ChannelFrames[ch], st.ChannelRing[ch].Gaps)
		}
	}
	if st.BadOpcode+st.BadLength+st.BadWRID != 0 || st.TotalErrors() != st.ErrorCount(cq.WRFlushErr) {
		t.Errorf("errors: %+v bad opcode %d length %d wrid %d", st.Errors, st.BadOpcode, st.BadLength, st.BadWRID)
	}
	if r.bad.Load() != 0 {
		t.Errorf("posted + held != depth seen %d times", r.bad.Load())
	}
	if st.Posted+st.Held != r.srv.Depth() || st.Downstream != 0 {
		t.Errorf("at rest: posted %d held %d downstream %d", st.Posted, st.Held, st.Downstream)
	}
}

// TestServerHoldAll holds every slot: the sender backs off on RNR NAKs;
// one Release lets exactly one more frame in; releasing everything lets
// the rest through with nothing lost.
func TestServerHoldAll(t *testing.T) {
	const depth, total = 8, 40
	devs := devices(t, 2)
	r := newRXServer(t, withConfig(func(c *server.Config) { c.Depth = depth }))
	r.hold.Store(true)
	rnr0 := hwCounter(t, devs[0], "send_rnr_err")
	snd := startPeer(t, 2*time.Minute, "rocev2-send", r.sendArgs("-n", strconv.Itoa(total), "-s", "256")...)
	r.waitFrames(depth, 30*time.Second)
	// The sender keeps retrying; wait until the receiver has NAKed a few
	// times, then check nothing more was delivered.
	deadline := time.Now().Add(30 * time.Second)
	for hwCounter(t, devs[0], "send_rnr_err") < rnr0+3 {
		if time.Now().After(deadline) {
			t.Fatal("no RNR NAKs from the server while every slot is held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := r.srv.Stats(); st.Frames != depth || st.Posted != 0 || st.Held != depth || st.PostedLowMark != 0 {
		t.Fatalf("all held: frames %d posted %d held %d low %d", st.Frames, st.Posted, st.Held, st.PostedLowMark)
	}
	r.releaseHeld(1)
	r.waitFrames(depth+1, 30*time.Second)
	rnr1 := hwCounter(t, devs[0], "send_rnr_err")
	for hwCounter(t, devs[0], "send_rnr_err") < rnr1+3 {
		if time.Now().After(deadline) {
			t.Fatal("no RNR NAKs after the one slot was refilled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := r.srv.Stats().Frames; n != depth+1 {
		t.Fatalf("one release let %d frames in, want exactly 1", n-depth)
	}
	r.hold.Store(false)
	r.releaseHeld(-1)
	snd.wait(t)
	r.waitFrames(total, 30*time.Second)
	c := r.checker(0)
	c.Expect(total)
	if c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 || c.Frames != total {
		t.Fatalf("checker %+v", c)
	}
	hw, err := r.srv.HWCounters()
	if err != nil || hw["send_rnr_err"] < rnr0+6 {
		t.Errorf("HWCounters: %v, %v", hw, err)
	}
	t.Logf("RNR NAKs sent by the server: %d", hwCounter(t, devs[0], "send_rnr_err")-rnr0)
}

// TestServerSenderKilled kills a sender mid-stream: the server ends its
// connection (the loop drains and stops), a new sender connects to a
// fresh QP on the same slab, and Close returns.
func TestServerSenderKilled(t *testing.T) {
	r := newRXServer(t)
	snd := startPeer(t, 2*time.Minute, "rocev2-send", r.sendArgs("-n", "0", "-t", "90s", "-s", "2000", "-C", "0")...)
	r.waitFrames(1000, time.Minute)
	qpn := r.srv.QPN()
	snd.cmd.Process.Kill()
	<-snd.done
	st := r.waitStats(30*time.Second, "the killed sender's connection to end", func(s *server.Stats) bool { return s.SessionEnds == 1 })
	if !strings.Contains(r.log(), "gone") {
		t.Errorf("the side channel did not report the sender gone:\n%s", r.log())
	}
	if st.Posted != 0 {
		t.Errorf("after the connection ended %d slots still posted", st.Posted)
	}
	first := st.Frames
	r.send(time.Minute, "-n", "2000", "-s", "1-4000", "-C", "16")
	st = r.waitStats(30*time.Second, "the second sender's frames", func(s *server.Stats) bool { return s.ChannelFrames[16] >= 2000 })
	if r.srv.QPN() == qpn && st.Sessions != 2 {
		t.Errorf("second sender: QPN %#x (first %#x), sessions %d", r.srv.QPN(), qpn, st.Sessions)
	}
	a, b := r.checker(0), r.checker(1)
	b.Expect(2000)
	if a.Lost != 0 || a.Corrupt != 0 || a.Duplicate != 0 || b.Lost != 0 || b.Corrupt != 0 || b.Frames != 2000 {
		t.Errorf("first sender %+v, second %+v", a, b)
	}
	t0 := time.Now()
	if err := r.close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("first sender: %d frames before the kill; Close took %v", first, time.Since(t0))
}

// TestServerCloseWhileHeld is rogue's teardown regression on rxe: frames
// held across Close keep their bytes, Release after Close is harmless, and
// Close of a parked loop is quick.
func TestServerCloseWhileHeld(t *testing.T) {
	r := newRXServer(t, withConfig(func(c *server.Config) { c.SpinBudget = time.Millisecond }))
	r.hold.Store(true)
	r.send(time.Minute, "-n", "20", "-s", "3000")
	r.waitFrames(20, 30*time.Second)
	r.waitStats(10*time.Second, "the sender's connection to end", func(s *server.Stats) bool { return s.SessionEnds == 1 })
	// A fresh connection whose loop parks: then Close must wake it.
	snd := startPeer(t, time.Minute, "rocev2-send", r.sendArgs("-n", "1", "-s", "100", "-C", "16")...)
	snd.wait(t)
	r.waitFrames(21, 30*time.Second)
	time.Sleep(50 * time.Millisecond) // well past the 1 ms spin budget: parked
	r.mu.Lock()
	held := append([]server.Frame(nil), r.held...)
	r.held = nil
	r.mu.Unlock()
	t0 := time.Now()
	r.cancel()
	if err := r.srv.Close(); err != nil {
		t.Fatal(err)
	}
	closeTook := time.Since(t0)
	<-r.srv.Done()
	if err := r.srv.Err(); err != nil {
		t.Errorf("Err after Close: %v", err)
	}
	var c framecheck.Checker
	for _, f := range held[:20] {
		c.Check(f.Data())
	}
	c.Expect(20)
	if c.Lost != 0 || c.Corrupt != 0 || len(held) != 21 {
		t.Fatalf("held frames after Close: %+v (%d held)", c, len(held))
	}
	for _, f := range held {
		f.Release()
		f.Release()
	}
	if err := r.srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := r.srv.Send(nil); !errors.Is(err, server.ErrReceiveOnly) {
		t.Errorf("Send: %v", err)
	}
	t.Logf("Close with a parked loop and 21 frames held took %v", closeTook)
}

// TestServerCompleteConnection drives rogue's low-level path the way an
// FPGA's host software would: the test plays the handshake itself (here
// over TCP with rocev2-send), hands the sender's QPN, PSN and GID to
// SetPeerGID and CompleteConnection, and the frames stream in.
func TestServerCompleteConnection(t *testing.T) {
	r := newRXServer(t, withoutSideChannel()) // no side channel: this test owns the connection
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(r.port+50))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	devs := devices(t, 2)
	snd := startPeer(t, time.Minute, "rocev2-send", "-d", devs[1], "-g", gidArg(t, devs[1]), "-p", strconv.Itoa(r.port+50), "-n", "3000", "-s", "1-3000", "10.99.0.1")
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := make([]byte, qp.PeerRecordLen)
	if _, err := readFull(c, rec); err != nil {
		t.Fatal(err)
	}
	var peer qp.Peer
	if err := peer.UnmarshalText(rec); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.SetPeerGID(peer.GID[:]); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.CompleteConnection(peer.QPN, peer.PSN, r.srv.ActiveMTU(), 12); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.CompleteConnection(peer.QPN, peer.PSN, r.srv.ActiveMTU(), 12); !errors.Is(err, server.ErrConnected) {
		t.Errorf("second CompleteConnection: %v", err)
	}
	me := qp.Peer{QPN: r.srv.QPN(), PSN: r.srv.SendPSN(), GID: r.srv.GID()}
	b, _ := me.MarshalText()
	c.Write(append(b, 0))
	done := make([]byte, 5)
	if _, err := readFull(c, done); err != nil || string(done) != "done\x00" {
		t.Fatalf("done: %q %v", done, err)
	}
	snd.wait(t)
	r.waitFrames(3000, 30*time.Second)
	ck := r.checker(0)
	ck.Expect(3000)
	if ck.Lost != 0 || ck.Corrupt != 0 || ck.Duplicate != 0 {
		t.Fatalf("%+v", ck)
	}
	select {
	case <-r.srv.Done():
		t.Fatalf("the server stopped: %v", r.srv.Err())
	default:
	}
}

// TestServerTakeover: a second sender connecting while the first streams
// replaces it (the first's QP goes to ERROR, its sends fail), and the
// second's frames all arrive.
func TestServerTakeover(t *testing.T) {
	r := newRXServer(t)
	first := startPeer(t, 2*time.Minute, "rocev2-send", r.sendArgs("-n", "0", "-t", "60s", "-s", "1000", "-C", "0")...)
	r.waitFrames(500, time.Minute)
	r.send(time.Minute, "-n", "1000", "-s", "1-5000", "-C", "16")
	st := r.waitStats(30*time.Second, "the second sender's frames", func(s *server.Stats) bool { return s.ChannelFrames[16] >= 1000 })
	<-first.done
	if first.err == nil {
		t.Errorf("the replaced sender finished without an error:\n%s", first.out.String())
	}
	a, b := r.checker(0), r.checker(1)
	b.Expect(1000)
	if a.Lost != 0 || a.Corrupt != 0 || a.Duplicate != 0 || b.Lost != 0 || b.Corrupt != 0 || b.Frames != 1000 {
		t.Errorf("first sender %+v, second %+v", a, b)
	}
	if st.Sessions != 2 || st.SessionEnds < 1 {
		t.Errorf("connections %d made, %d ended; want 2 and at least 1", st.Sessions, st.SessionEnds)
	}
	t.Logf("replaced sender: %v: %s", first.err, strings.TrimSpace(first.out.String()))
}

// TestServerTakeovers: eight senders in a row, each connecting while the
// one before streams, then a ninth that sends 1000 frames. Every takeover
// ends the previous connection in time for the exchange (the rig's side
// channel times out after 2 s), nothing a replaced sender got through is
// lost, repeated or corrupt, all of the last sender's frames arrive, and
// every slot is accounted for.
func TestServerTakeovers(t *testing.T) {
	const n = 8
	r := newRXServer(t)
	var senders []*peer
	for k := range n {
		senders = append(senders, startPeer(t, 2*time.Minute, "rocev2-send",
			r.sendArgs("-n", "0", "-t", "60s", "-s", "1-3000", "-C", strconv.Itoa(16*k))...))
		r.waitStats(time.Minute, fmt.Sprintf("sender %d's frames", k), func(s *server.Stats) bool { return s.ChannelFrames[16*k] >= 200 })
	}
	r.send(time.Minute, "-n", "1000", "-s", "1-5000", "-C", strconv.Itoa(16*n))
	st := r.waitStats(30*time.Second, "the last sender's frames", func(s *server.Stats) bool { return s.ChannelFrames[16*n] >= 1000 })
	for k, p := range senders {
		<-p.done
		if p.err == nil {
			t.Errorf("replaced sender %d finished without an error:\n%s", k, p.out.String())
		}
		if c := r.checker(k); c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 || c.Frames < 200 {
			t.Errorf("replaced sender %d: %+v", k, c)
		}
	}
	last := r.checker(n)
	last.Expect(1000)
	if last.Lost != 0 || last.Corrupt != 0 || last.Frames != 1000 {
		t.Errorf("last sender: %+v", last)
	}
	if st.Sessions != n+1 || st.SessionEnds < n || st.Posted+st.Held != r.srv.Depth() {
		t.Errorf("sessions %d made, %d ended (want %d, at least %d); posted %d + held %d, depth %d",
			st.Sessions, st.SessionEnds, n+1, n, st.Posted, st.Held, r.srv.Depth())
	}
}

// TestServerFramesChannel: without a Handler frames arrive on Frames(),
// which Close closes; a consumer releasing from its own goroutine keeps
// the stream going.
func TestServerFramesChannel(t *testing.T) {
	devs := devices(t, 2)
	cfg := server.DefaultConfig(devs[0])
	cfg.GIDIndex = gidIndex(t, devs[0])
	cfg.Depth = 32
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ":18695")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln, server.ServeOptions{WatchPeer: true})
	var c framecheck.Checker
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for f := range srv.Frames() {
			c.Check(f.Data())
			f.Release()
		}
	}()
	runPeer(t, time.Minute, "rocev2-send", "-d", devs[1], "-g", gidArg(t, devs[1]), "-p", "18695", "-n", "2000", "-s", "1-3000", "10.99.0.1")
	deadline := time.Now().Add(30 * time.Second)
	for srv.Stats().Frames < 2000 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	<-consumed
	c.Expect(2000)
	if c.Frames != 2000 || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 {
		t.Fatalf("%+v", c)
	}
}

// sendSize is the payload size rocev2-send gives frame seq for -s min-max.
func sendSize(seq uint64, min, max int) int {
	return min + int((seq*0x9e3779b97f4a7c15>>40)%uint64(max-min+1))
}

// abandonedRe matches rocev2-send -reconnect's line for a failed
// connection: the frames it had posted and not seen acknowledged.
var abandonedRe = regexp.MustCompile(`completion error: .*; frames (\d+)(?:\.\.(\d+))? unacknowledged`)

// abandoned parses rocev2-send's reports of failed connections.
func abandoned(t *testing.T, out string) [][2]uint64 {
	t.Helper()
	var rs [][2]uint64
	for _, m := range abandonedRe.FindAllStringSubmatch(out, -1) {
		a, err := strconv.ParseUint(m[1], 10, 64)
		b := a
		if err == nil && m[2] != "" {
			b, err = strconv.ParseUint(m[2], 10, 64)
		}
		if err != nil {
			t.Fatalf("%q: %v", m[0], err)
		}
		rs = append(rs, [2]uint64{a, b})
	}
	return rs
}

// TestServerSenderReconnects: a sender whose frames are sometimes longer
// than the server's slots (4097..4110 bytes against 4096): each one breaks
// the connection (the server's receive fails, its QP goes to ERROR, the
// sender gets a NAK), and rocev2-send -reconnect connects again through
// the side channel and goes on with its next frame. The server takes each
// returning sender on a fresh QP, and what it did not receive is exactly,
// range by range, the oversized frames and the ones queued behind them,
// which the sender reported unacknowledged when each connection failed.
func TestServerSenderReconnects(t *testing.T) {
	const total, lo, hi, slot = 3000, 1, 4110, 4096
	r := newRXServer(t, withConfig(func(c *server.Config) { c.MaxPayload = slot }))
	out := r.send(5*time.Minute, "-n", strconv.Itoa(total), "-s", fmt.Sprintf("%d-%d", lo, hi), "-c", "4", "-reconnect", "40")
	fails := abandoned(t, out)
	// A failure at the end of the stream leaves nothing to reconnect for.
	sessions := uint64(1 + strings.Count(out, "; reconnecting ("))
	st := r.waitStats(30*time.Second, "the last connection to end", func(s *server.Stats) bool { return s.SessionEnds == sessions })
	// Each failure's oversized frame x is the first one in what the
	// sender had unacknowledged (a kernel that completes the frames
	// before it late may leave some acknowledged ones there): x and the
	// frames behind it never arrived, the ones before it did.
	var want []framecheck.Range
	var lost uint64
	for _, f := range fails {
		x := f[0]
		for x <= f[1] && sendSize(x, lo, hi) <= slot {
			x++
		}
		if x > f[1] {
			t.Errorf("a connection failed with frames %d..%d unacknowledged, none of them above %d bytes", f[0], f[1], slot)
			continue
		}
		lost += f[1] - x + 1
		if n := len(want); n > 0 && want[n-1].Last+1 == x {
			want[n-1].Last = f[1] // the next connection's first frame was oversized too
		} else {
			want = append(want, framecheck.Range{First: x, Last: f[1]})
		}
	}
	if len(fails) < 2 {
		t.Errorf("%d connections failed, want several (frames above %d bytes in the stream):\n%s", len(fails), slot, out)
	}
	c := r.checker(0)
	c.Expect(total)
	if c.Lost != lost || c.Frames != total-lost || c.Corrupt != 0 || c.Duplicate != 0 || st.Frames != c.Frames {
		t.Errorf("server: %d frames, checker %+v; the sender's failures %v leave %d frames lost", st.Frames, c, fails, lost)
	}
	if len(want) <= framecheck.MaxLostRanges && !slices.Equal(c.LostRanges[:c.NLostRanges], want) {
		t.Errorf("the server misses frames %v, want %v (the sender reported %v unacknowledged)", c.LostRanges[:c.NLostRanges], want, fails)
	}
	if bad := st.ErrorCount(cq.LocLenErr) + st.ErrorCount(cq.LocQPOpErr); bad != uint64(len(fails)) || st.Sessions != sessions || st.Exchanges != st.Sessions {
		t.Errorf("%d failed receives, %d sessions, %d exchanges for %d failed connections and %d sessions", bad, st.Sessions, st.Exchanges, len(fails), sessions)
	}
	if st.Posted+st.Held != r.srv.Depth() || st.Downstream != 0 || r.bad.Load() != 0 {
		t.Errorf("at rest: posted %d held %d downstream %d, invariant violations %d", st.Posted, st.Held, st.Downstream, r.bad.Load())
	}
	t.Logf("%d connections failed on an oversized frame, the sender reconnected each time; %d frames arrived, the %d missing are those it reported: %v\n%s",
		len(fails), c.Frames, lost, fails, lastLine(out))
}

// TestServerCloseWakesEveryone: Close from another goroutine while a
// sender streams, a consumer ranges over Frames, a stranger sits silent in
// the middle of its exchange and Serve waits in Accept (its context never
// cancelled): Close returns, Serve returns ErrClosed, the Frames channel
// closes, the stranger's connection is closed, Done is closed with a nil
// Err, and a second Close returns nil.
func TestServerCloseWakesEveryone(t *testing.T) {
	devs := devices(t, 2)
	cfg := server.DefaultConfig(devs[0])
	cfg.GIDIndex = gidIndex(t, devs[0])
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	const port = 18740
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(context.Background(), ln, server.ServeOptions{WatchPeer: true, Timeout: time.Minute})
	}()
	consumed := make(chan uint64, 1)
	go func() {
		n := uint64(0)
		for f := range srv.Frames() {
			n++
			f.Release()
		}
		consumed <- n
	}()
	snd := startPeer(t, 2*time.Minute, "rocev2-send", "-d", devs[1], "-g", gidArg(t, devs[1]), "-p", strconv.Itoa(port), "-n", "0", "-t", "90s", "-s", "1-4000", "10.99.0.1")
	deadline := time.Now().Add(time.Minute)
	for srv.Stats().Frames < 500 {
		if time.Now().After(deadline) {
			t.Fatalf("%d frames in a minute", srv.Stats().Frames)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stranger, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	stranger.Write([]byte("0000:000")) // a third of a record, then silence
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	took := time.Since(start)
	if err := within(t, "Serve's return", served); !errors.Is(err, server.ErrClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
	n := within(t, "the end of the Frames channel", consumed)
	stranger.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := stranger.Read(make([]byte, 64)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the stranger's connection after Close: %v, want it closed", err)
	}
	within(t, "Done", srv.Done())
	if err := srv.Err(); err != nil {
		t.Errorf("Err after Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	<-snd.done
	t.Logf("Close took %v with a sender streaming (%d frames consumed), a stranger mid-exchange and Serve in Accept; the sender: %s", took, n, lastLine(snd.out.String()))
}
