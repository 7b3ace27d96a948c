//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/internal/framecheck"
	"github.com/pureverbs/pureverbs/server"
)

// rxServer is a server.Server on rxe0 serving the side channel on a port
// of its own, with a handler that checks every payload (rocev2-send's
// format) per channel and either releases the frame or holds it.
type rxServer struct {
	t    *testing.T
	srv  *server.Server
	port int

	mu       sync.Mutex
	checkers [256]framecheck.Checker
	held     []*server.Frame
	hold     atomic.Bool
	bad      atomic.Int64 // invariant violations seen by the handler
	n        atomic.Uint64
	logs     []string
	serveErr chan error
	cancel   context.CancelFunc
	once     sync.Once
	closeErr error
}

var nextPort atomic.Int32

// checkerOf is the checker of a channel: each sender in a test uses its own
// group of 16 channels (rocev2-send -C), and a sender's sequence numbers
// run across all its channels.
func checkerOf(ch uint8) int { return int(ch) / 16 }

func newRXServer(t *testing.T, edit func(*server.Config)) *rxServer {
	return newRXServerServing(t, edit, true)
}

func newRXServerServing(t *testing.T, edit func(*server.Config), serve bool) *rxServer {
	t.Helper()
	devs := devices(t, 2)
	r := &rxServer{t: t, port: 18600 + int(nextPort.Add(1)), serveErr: make(chan error, 1)}
	cfg := server.DefaultConfig(devs[0])
	cfg.Handler = r.handle
	if edit != nil {
		edit(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	r.srv = srv
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(r.port))
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if !serve {
		ln.Close()
		r.serveErr <- nil
	} else {
		go func() {
			r.serveErr <- srv.Serve(ctx, ln, server.ServeOptions{WatchPeer: true, Timeout: 2 * time.Second, Logf: r.logf})
		}()
	}
	t.Cleanup(func() { r.close() })
	return r
}

func (r *rxServer) logf(format string, args ...any) {
	r.mu.Lock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *rxServer) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.logs, "\n")
}

func (r *rxServer) handle(f *server.Frame) {
	if r.n.Add(1)%97 == 0 {
		if st := r.srv.Stats(); st.Posted+st.Held != r.srv.Depth() {
			r.bad.Add(1)
		}
	}
	r.mu.Lock()
	r.checkers[checkerOf(f.Channel())].Check(f.Data())
	if r.hold.Load() {
		r.held = append(r.held, f)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	f.Release()
}

// releaseHeld releases up to n held frames (all for n < 0).
func (r *rxServer) releaseHeld(n int) {
	r.mu.Lock()
	if n < 0 || n > len(r.held) {
		n = len(r.held)
	}
	fs := r.held[:n]
	r.held = append([]*server.Frame(nil), r.held[n:]...)
	r.mu.Unlock()
	for _, f := range fs {
		f.Release()
	}
}

func (r *rxServer) close() error {
	r.once.Do(func() {
		r.cancel()
		r.closeErr = r.srv.Close()
		<-r.serveErr
		r.releaseHeld(-1)
	})
	return r.closeErr
}

// waitFrames waits until the server delivered n frames in all.
func (r *rxServer) waitFrames(n uint64, limit time.Duration) {
	r.t.Helper()
	r.waitStats(limit, fmt.Sprintf("%d frames", n), func(st *server.Stats) bool { return st.Frames >= n })
}

func (r *rxServer) waitStats(limit time.Duration, what string, cond func(*server.Stats) bool) server.Stats {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := r.srv.Stats()
		if cond(&st) {
			return st
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("waited %v for %s; stats: frames %d posted %d held %d errors %v bad opcode %d length %d sessions %d/%d\nlog:\n%s",
				limit, what, st.Frames, st.Posted, st.Held, st.Errors, st.BadOpcode, st.BadLength, st.Sessions, st.SessionEnds, r.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checker returns the checker of sender group g (see checkerOf).
func (r *rxServer) checker(g int) framecheck.Checker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkers[g]
}

// send runs rocev2-send on rxe1 against the server with extra arguments.
func (r *rxServer) sendArgs(args ...string) []string {
	devs := devices(r.t, 2)
	return append(append([]string{"-d", devs[1], "-p", strconv.Itoa(r.port)}, args...), "10.99.0.1")
}

func (r *rxServer) send(limit time.Duration, args ...string) string {
	r.t.Helper()
	return runPeer(r.t, limit, "rocev2-send", r.sendArgs(args...)...)
}

// TestServerStream streams 50 000 frames of 1..9000 bytes (most of them
// several packets at the 1024-byte path MTU) on four channels: none lost,
// duplicated or corrupt, no ring gaps, posted + held == depth, and few
// allocations per frame.
func TestServerStream(t *testing.T) {
	total := 50000
	if testing.Short() {
		total = 5000
	}
	r := newRXServer(t, nil)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	out := r.send(10*time.Minute, "-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4")
	r.waitFrames(uint64(total), time.Minute)
	el := time.Since(start)
	runtime.ReadMemStats(&ms1)
	st := r.waitStats(30*time.Second, "the sender's connection to end", func(s *server.Stats) bool { return s.SessionEnds == 1 })
	t.Logf("%d frames, %d bytes in %v (%.0f frames/s); sender: %s", st.Frames, st.Bytes, el.Round(time.Millisecond),
		float64(st.Frames)/el.Seconds(), strings.TrimSpace(out))
	allocs := float64(ms1.Mallocs-ms0.Mallocs) / float64(total)
	t.Logf("process-wide allocations per frame: %.4f (%d in all, test harness and side channel included)", allocs, ms1.Mallocs-ms0.Mallocs)
	if allocs > 0.05 {
		t.Errorf("%.4f allocations per frame", allocs)
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
		if st.ChannelFrames[ch] != uint64(total/4) || st.ChannelGaps[ch] != 0 {
			t.Errorf("channel %d: %d frames, %d gaps", ch, st.ChannelFrames[ch], st.ChannelGaps[ch])
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

// hwCounter reads one of an rxe port's hardware counters.
func hwCounter(t *testing.T, dev, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestServerHoldAll holds every slot: the sender backs off on RNR NAKs;
// one Release lets exactly one more frame in; releasing everything lets
// the rest through with nothing lost.
func TestServerHoldAll(t *testing.T) {
	const depth, total = 8, 40
	devs := devices(t, 2)
	r := newRXServer(t, func(c *server.Config) { c.Depth = depth })
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
	r := newRXServer(t, nil)
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
	r := newRXServer(t, func(c *server.Config) { c.SpinBudget = time.Millisecond })
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
	held := append([]*server.Frame(nil), r.held...)
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

// TestServerMalformed sends what the server must refuse, each from a peer
// that really sends it, and checks the server keeps serving.
func TestServerMalformed(t *testing.T) {
	t.Run("PlainSend", func(t *testing.T) {
		r := newRXServer(t, nil)
		r.send(time.Minute, "-op", "send", "-n", "5", "-s", "100")
		st := r.waitStats(10*time.Second, "5 bad opcodes", func(s *server.Stats) bool { return s.BadOpcode == 5 })
		if st.Frames != 0 || st.Posted+st.Held != r.srv.Depth() {
			t.Errorf("frames %d posted %d held %d", st.Frames, st.Posted, st.Held)
		}
	})
	t.Run("ZeroLength", func(t *testing.T) {
		r := newRXServer(t, nil)
		r.send(time.Minute, "-n", "5", "-s", "0")
		st := r.waitStats(10*time.Second, "5 bad lengths", func(s *server.Stats) bool { return s.BadLength == 5 })
		if st.Frames != 0 {
			t.Errorf("%d frames delivered", st.Frames)
		}
	})
	t.Run("LongerThanSlot", func(t *testing.T) {
		r := newRXServer(t, func(c *server.Config) { c.MaxPayload = 1024 })
		p := startPeer(t, time.Minute, "rocev2-send", r.sendArgs("-n", "1", "-s", "2000")...)
		<-p.done
		if p.err == nil {
			t.Errorf("the sender of an oversized SEND succeeded:\n%s", p.out.String())
		}
		// 6.1's rxe completes the receive with LOC_QP_OP_ERR (newer
		// kernels: LOC_LEN_ERR) and moves the QP to ERROR.
		st := r.waitStats(10*time.Second, "the connection to end", func(s *server.Stats) bool {
			return s.ErrorCount(cq.LocLenErr)+s.ErrorCount(cq.LocQPOpErr) == 1 && s.SessionEnds == 1
		})
		t.Logf("sender: %s; server errors %v", strings.TrimSpace(p.out.String()), st.Errors)
		r.send(time.Minute, "-n", "10", "-s", "1024")
		r.waitFrames(10, 10*time.Second)
	})
	t.Run("RDMAWrite", func(t *testing.T) {
		// A frame held in slot 0, then an RDMA WRITE aimed at slot 0: the
		// write is refused and the held bytes are what the SEND put there.
		r := newRXServer(t, nil)
		r.hold.Store(true)
		r.send(time.Minute, "-n", "1", "-s", "64")
		r.waitFrames(1, 10*time.Second)
		r.mu.Lock()
		held := r.held[0]
		r.mu.Unlock()
		before := append([]byte(nil), held.Data()...)
		args := []string{"-op", "write", "-n", "1", "-s", "64", "-C", "16",
			"-raddr", strconv.FormatUint(r.srv.MRAddr(), 10), "-rkey", strconv.FormatUint(uint64(r.srv.RKey()), 10)}
		p := startPeer(t, time.Minute, "rocev2-send", r.sendArgs(args...)...)
		<-p.done
		out := p.out.String()
		// rxe checks the QP's access flags (none granted) before the MR's
		// and answers NAK "invalid request"; with a QP granting remote
		// write the MR (local write only) would answer "remote access".
		if p.err == nil || !(strings.Contains(out, "REM_ACCESS_ERR") || strings.Contains(out, "REM_INV_REQ_ERR")) {
			t.Fatalf("RDMA WRITE into the slab: %v\n%s", p.err, out)
		}
		st := r.srv.Stats()
		t.Logf("sender: %s; server frames %d errors %v sessions %d/%d", strings.TrimSpace(out), st.Frames, st.Errors, st.Sessions, st.SessionEnds)
		if st.Frames != 1 {
			t.Errorf("%d frames, want only the SEND's", st.Frames)
		}
		if got := held.Data(); !bytes.Equal(got, before) || held.Len() != 64 {
			t.Errorf("slot 0 changed under the refused write")
		}
		var c framecheck.Checker
		c.Check(held.Data())
		if c.Corrupt != 0 || c.Lost != 0 {
			t.Errorf("held frame fails its checksum: %+v", c)
		}
		r.hold.Store(false)
		r.releaseHeld(-1)
		r.send(time.Minute, "-n", "10", "-s", "64", "-C", "32")
		r.waitFrames(11, 10*time.Second)
		if c := r.checker(2); c.Corrupt != 0 || c.Lost != 0 || c.Frames != 10 {
			t.Errorf("after the write: %+v", c)
		}
	})
}

// TestServerSideChannelGarbage feeds the side channel garbage, a truncated
// record and silence; each is refused and logged, and then a real sender
// streams.
func TestServerSideChannelGarbage(t *testing.T) {
	r := newRXServer(t, nil)
	addr := "127.0.0.1:" + strconv.Itoa(r.port)
	send := func(b []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(b)
		if len(b) < server.RecordLen {
			c.(*net.TCPConn).CloseWrite()
		}
		var buf [64]byte
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(buf[:]); err == nil {
			t.Errorf("the server answered %q to %q", buf[:n], b)
		}
	}
	send([]byte(strings.Repeat("garbage!", 7)[:server.RecordLen]))
	send([]byte("0000:000011:00"))
	send([]byte("0000:0000zz:000001:00000000000000000000ffff0a630002\x00"))
	c, err := net.Dial("tcp", addr) // silent: the server's timeout ends it
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(2500 * time.Millisecond)
	r.send(time.Minute, "-n", "100", "-s", "500")
	r.waitFrames(100, 10*time.Second)
	log := r.log()
	for _, want := range []string{"malformed peer record", "got 14 of 52 bytes", "timeout"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if st := r.srv.Stats(); st.Sessions != 1 {
		t.Errorf("%d connections made, want 1 (garbage must not connect)", st.Sessions)
	}
}

// TestServerConfigChecks: New names the unused GID slot and refuses a path
// MTU above the port's.
func TestServerConfigChecks(t *testing.T) {
	devs := devices(t, 1)
	fds, maps := openFDs(t), uverbsMappings(t)
	defer func() {
		if n, m := openFDs(t), uverbsMappings(t); n != fds || m != maps {
			t.Errorf("after the failed News and a Close: %d fds and %d uverbs mappings, %d and %d before", n, m, fds, maps)
		}
	}()
	cfg := server.DefaultConfig(devs[0])
	cfg.GIDIndex = 77
	_, err := server.New(cfg)
	if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "GID index 77 on "+devs[0]) {
		t.Errorf("unused GID slot: %v", err)
	}
	cfg = server.DefaultConfig(devs[0])
	cfg.PathMTU = 5
	if _, err := server.New(cfg); !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "active MTU") {
		t.Errorf("PMTU 4096 on a 1500-byte veth: %v", err)
	}
	cfg = server.DefaultConfig(devs[0])
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.SetPeerGID(make([]byte, 15)); err == nil {
		t.Error("a 15-byte peer GID was accepted")
	}
	if err := srv.CompleteConnection(0x11, 1, 6, 12); err == nil {
		t.Error("PMTU 6 accepted")
	}
	if err := srv.CompleteConnection(0x11, 1, 3, 0); err == nil {
		t.Error("min RNR timer 0 accepted")
	}
	if got := srv.GIDString(); got != "0000:0000:0000:0000:0000:ffff:0a63:0001" {
		t.Errorf("GIDString %q", got)
	}
}

// TestServerCompleteConnection drives rogue's low-level path the way an
// FPGA's host software would: the test plays the handshake itself (here
// over TCP with rocev2-send), hands the sender's QPN, PSN and GID to
// SetPeerGID and CompleteConnection, and the frames stream in.
func TestServerCompleteConnection(t *testing.T) {
	r := newRXServerServing(t, nil, false) // no side channel: this test owns the connection
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(r.port+50))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	devs := devices(t, 2)
	snd := startPeer(t, time.Minute, "rocev2-send", "-d", devs[1], "-p", strconv.Itoa(r.port+50), "-n", "3000", "-s", "1-3000", "10.99.0.1")
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := make([]byte, server.RecordLen)
	if _, err := readFull(c, rec); err != nil {
		t.Fatal(err)
	}
	var peer server.Peer
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
	me := server.Peer{QPN: r.srv.QPN(), PSN: r.srv.SendPSN(), GID: r.srv.GID()}
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

func readFull(c net.Conn, b []byte) (int, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestServerSoak streams 1 000 000 frames (make soak-server).
func TestServerSoak(t *testing.T) {
	if os.Getenv("RXEVM_SOAK") != "1" {
		t.Skip("soak: runs with RXEVM_SOAK=1 (make soak-server)")
	}
	const total = 1000000
	r := newRXServer(t, nil)
	start := time.Now()
	out := r.send(50*time.Minute, "-n", strconv.Itoa(total), "-s", "1-9000", "-c", "8", "-w", "100000")
	r.waitFrames(total, 5*time.Minute)
	el := time.Since(start)
	st := r.srv.Stats()
	c := r.checker(0)
	c.Expect(total)
	t.Logf("%d frames, %d bytes in %v (%.0f frames/s); sender: %s", st.Frames, st.Bytes, el.Round(time.Second),
		float64(st.Frames)/el.Seconds(), strings.TrimSpace(out))
	if c.Frames != total || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 || r.bad.Load() != 0 {
		t.Fatalf("checker %+v, invariant violations %d", c, r.bad.Load())
	}
	for ch := range 8 {
		if st.ChannelGaps[ch] != 0 {
			t.Errorf("channel %d: %d gaps", ch, st.ChannelGaps[ch])
		}
	}
}

// TestServerTools runs rocev2-server as a program with -o and --hold (a
// slow consumer) against rocev2-send: the summary says 0 lost, 0 corrupt
// and the file holds every payload back to back.
func TestServerTools(t *testing.T) {
	devs := devices(t, 2)
	const port, n, size = 18690, 300, 700
	file := t.TempDir() + "/frames.bin"
	srv := startPeer(t, 2*time.Minute, "rocev2-server", "-d", devs[0], "-p", strconv.Itoa(port), "-n", strconv.Itoa(n),
		"-r", "16", "-o", file, "--hold", "2ms", "-timeout", "90s")
	waitListening(t, srv, port, 30*time.Second)
	runPeer(t, time.Minute, "rocev2-send", "-d", devs[1], "-p", strconv.Itoa(port), "-n", strconv.Itoa(n), "-s", strconv.Itoa(size), "-c", "3", "10.99.0.1")
	out := srv.wait(t)
	for _, want := range []string{"frames 300, bytes 210000", "channels 0:100 1:100 2:100; ring gaps 0", "0 lost, 0 corrupt"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c framecheck.Checker
	for off := 0; off+size <= len(b); off += size {
		c.Check(b[off : off+size])
	}
	c.Expect(n)
	if len(b) != n*size || c.Lost != 0 || c.Corrupt != 0 {
		t.Errorf("file: %d bytes, %+v", len(b), c)
	}
}

// TestServerTakeover: a second sender connecting while the first streams
// replaces it (the first's QP goes to ERROR, its sends fail), and the
// second's frames all arrive.
func TestServerTakeover(t *testing.T) {
	r := newRXServer(t, nil)
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

// TestServerFramesChannel: without a Handler frames arrive on Frames(),
// which Close closes; a consumer releasing from its own goroutine keeps
// the stream going.
func TestServerFramesChannel(t *testing.T) {
	devs := devices(t, 2)
	cfg := server.DefaultConfig(devs[0])
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
	runPeer(t, time.Minute, "rocev2-send", "-d", devs[1], "-p", "18695", "-n", "2000", "-s", "1-3000", "10.99.0.1")
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
