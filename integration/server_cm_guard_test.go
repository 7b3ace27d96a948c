//go:build integration

package integration

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
	"github.com/pureverbs/pureverbs/server"
	"golang.org/x/sys/unix"
)

// TestServerCMStalledRequests: eight requesters that send their REQ and
// never the RTU hold all eight accepts (MaxAccepts' default) with a
// Timeout of a minute; a real sender (rocev2-send -cm) still connects at
// once and streams, because its request evicts the oldest accept not yet
// established (whose requester gets the REJ). Then the server closes
// with seven accepts still waiting for their RTU: ServeCM returns at once
// (it waited for those accepts before it cancelled them), and each of
// the seven requesters gets its REJ.
func TestServerCMStalledRequests(t *testing.T) {
	const stalled = server.DefaultMaxCMAccepts
	r := newRXServer(t)
	ended := r.serveCM(server.CMOptions{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ach, err := ucma.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ach.Close()
	dst := netip.AddrPortFrom(netip.MustParseAddr("10.99.0.1"), uint16(r.port))
	var ids []uint32
	for i := range stalled {
		ids = append(ids, rawConnect(t, ctx, ach, uint64(i+1), dst, 0x5000+uint32(i)))
		// Each REP says its accept is past the request, waiting for the
		// RTU; waiting for it keeps the requests in order of arrival.
		if ev := awaitRaw(t, ctx, ach, ucma.EventConnectResponse, 20*time.Second); ev.ID != ids[i] {
			t.Fatalf("REP for id %d, want %d", ev.ID, ids[i])
		}
	}
	start := time.Now()
	out := r.send(2*time.Minute, "-cm", "-n", "300", "-s", "1-2000")
	st := r.waitStats(30*time.Second, "the sender's 300 frames", func(s *server.Stats) bool { return s.Frames >= 300 })
	t.Logf("the sender ran %v with %d stalled requests held", time.Since(start).Round(time.Millisecond), stalled)
	if c := r.checker(0); c.Frames != 300 || c.Lost+c.Corrupt+c.Duplicate != 0 {
		t.Errorf("checker %+v", c)
	}
	if st.CMConnects != 1 || st.CMEvicted != 1 || st.CMRefused != 0 {
		t.Errorf("CM connects %d, evicted %d, refused %d; want 1, 1, 0\n%s", st.CMConnects, st.CMEvicted, st.CMRefused, r.log())
	}
	if ev := awaitRaw(t, ctx, ach, ucma.EventRejected, 10*time.Second); ev.ID != ids[0] || ev.Status != rdmacm.RejectConsumer {
		t.Errorf("REJ for id %d reason %d, want the oldest request's (%d) with reason %d", ev.ID, ev.Status, ids[0], rdmacm.RejectConsumer)
	}
	start = time.Now()
	if err := r.srv.Close(); err != nil {
		t.Errorf("server Close: %v", err)
	}
	select {
	case <-ended:
		t.Logf("ServeCM returned %v after the server's Close, with %d accepts waiting", time.Since(start).Round(time.Millisecond), stalled-1)
	case <-time.After(5 * time.Second):
		t.Errorf("ServeCM still running 5 s after the server's Close, with %d accepts waiting", stalled-1)
	}
	rejected := map[uint32]bool{}
	for range stalled - 1 {
		ev := awaitRaw(t, ctx, ach, ucma.EventRejected, 10*time.Second)
		rejected[ev.ID] = true
	}
	for _, id := range ids[1:] {
		if !rejected[id] {
			t.Errorf("no REJ for stalled request %d (REJs for %v)", id, rejected)
		}
	}
	t.Logf("sender: %s\nserver log:\n%s", strings.TrimSpace(out), r.log())
}

// TestServerCMAcceptTimeout: an accept whose requester never sends the
// RTU ends after CMOptions.Timeout: the requester gets the REJ, the
// failure is counted and logged with the timeout.
func TestServerCMAcceptTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	r := newRXServer(t)
	r.serveCM(server.CMOptions{Timeout: timeout})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ach, err := ucma.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ach.Close()
	rawConnect(t, ctx, ach, 1, netip.AddrPortFrom(netip.MustParseAddr("10.99.0.1"), uint16(r.port)), 0x4345)
	awaitRaw(t, ctx, ach, ucma.EventConnectResponse, 20*time.Second)
	start := time.Now()
	awaitRaw(t, ctx, ach, ucma.EventRejected, 5*timeout)
	took := time.Since(start)
	st := r.waitStats(10*time.Second, "the failed accept", func(s *server.Stats) bool { return s.CMFailures == 1 })
	if st.CMConnects != 0 || st.CMEvicted != 0 || !strings.Contains(r.log(), "not established within 2s") {
		t.Errorf("CM connects %d evicted %d; log:\n%s", st.CMConnects, st.CMEvicted, r.log())
	}
	t.Logf("REJ %v after the REP (timeout %v)", took.Round(time.Millisecond), timeout)
}

// TestServerCMAllowList: with CMOptions.AllowedSenders set, a request from
// an address off the list is rejected at once, before any QP is built (the
// requester gets the REJ, no REP), while a sender on the list streams: the
// allow-list of the side channel holds through the CM port too.
func TestServerCMAllowList(t *testing.T) {
	r := newRXServer(t)
	r.serveCM(server.CMOptions{AllowedSenders: []netip.Prefix{netip.MustParsePrefix("10.99.0.2/32")}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// From rxe0's own address (10.99.0.1): off the list.
	addr := netip.AddrPortFrom(netip.MustParseAddr("10.99.0.1"), uint16(r.port)).String()
	c, err := rdmacm.Dial(ctx, addr, rdmacm.Options{Source: netip.MustParseAddr("10.99.0.1")})
	var re *rdmacm.RejectError
	if err == nil {
		c.Close()
		t.Fatal("a sender off the allow-list connected")
	} else if !errors.As(err, &re) || re.Reason != rdmacm.RejectConsumer {
		t.Fatalf("dial from off the list: %v, want a REJ with reason %d", err, rdmacm.RejectConsumer)
	}
	out := r.send(2*time.Minute, "-cm", "-n", "200", "-s", "300")
	st := r.waitStats(30*time.Second, "200 frames", func(s *server.Stats) bool { return s.Frames >= 200 })
	if st.CMRefused != 1 || st.CMConnects != 1 || st.CMFailures != 0 {
		t.Errorf("CM refused %d, connects %d, failures %d; want 1, 1, 0\n%s", st.CMRefused, st.CMConnects, st.CMFailures, r.log())
	}
	if !strings.Contains(r.log(), "refused 10.99.0.1:") || !strings.Contains(r.log(), "not on the allow-list") {
		t.Errorf("the refusal is not logged:\n%s", r.log())
	}
	t.Logf("sender: %s", strings.TrimSpace(out))
}

// TestServerToolsAllow: rocev2-server -allow with an address no sender
// has refuses both ways in: rocev2-send over the side channel and with
// -cm both fail, and the summary counts one refusal for each.
func TestServerToolsAllow(t *testing.T) {
	devs := devices(t, 2)
	const port = 18691
	srv := startPeer(t, 2*time.Minute, "rocev2-server", "-d", devs[0], "-p", strconv.Itoa(port), "-q", "-allow", "10.99.0.3,192.0.2.0/24")
	waitListening(t, srv, port, 30*time.Second)
	send := func(args ...string) {
		t.Helper()
		p := startPeer(t, time.Minute, "rocev2-send", append(append([]string{"-d", devs[1], "-g", "10.99.0.2", "-p", strconv.Itoa(port), "-n", "10"}, args...), "10.99.0.1")...)
		<-p.done
		if p.err == nil {
			t.Errorf("rocev2-send %v connected to a server that allows neither it nor its address:\n%s", args, p.out.String())
		}
	}
	send()
	send("-cm")
	if err := srv.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	out := srv.wait(t)
	for _, want := range []string{"frames 0,", "1 connections refused", "1 requests refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

var tookBytes = regexp.MustCompile(`the file took the first (\d+) bytes`)

// TestServerToolsFullDisk: rocev2-server -o on a full disk (a 256 KiB
// tmpfs, filled by the first frames) stops storing at the first error,
// says so in its summary (the error, and how many bytes the file took,
// which is what the file holds) and exits 1; the frames are still all
// received.
func TestServerToolsFullDisk(t *testing.T) {
	devs := devices(t, 2)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	defer unix.Unmount(dir, 0)
	file := filepath.Join(dir, "frames.bin")
	const port, n, size = 18692, 300, 4000 // 1.2 MB
	srv := startPeer(t, 2*time.Minute, "rocev2-server", "-d", devs[0], "-p", strconv.Itoa(port), "-n", strconv.Itoa(n), "-o", file, "-timeout", "90s", "-q")
	waitListening(t, srv, port, 30*time.Second)
	runPeer(t, time.Minute, "rocev2-send", "-d", devs[1], "-g", "10.99.0.2", "-p", strconv.Itoa(port), "-n", strconv.Itoa(n), "-s", strconv.Itoa(size), "10.99.0.1")
	<-srv.done
	out := srv.out.String()
	var exit *exec.ExitError
	if !errors.As(srv.err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("rocev2-server on a full disk: %v, want exit status 1\n%s", srv.err, out)
	}
	for _, want := range []string{"frames 300, bytes 1200000", "output " + file + ": storing STOPPED at frame ", "no space left on device", "storing stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if m := tookBytes.FindStringSubmatch(out); m == nil || m[1] != strconv.FormatInt(fi.Size(), 10) {
		t.Errorf("the summary's byte count %v is not the file's size %d", m, fi.Size())
	}
	t.Logf("file %d bytes; rocev2-server:\n%s", fi.Size(), out)
}

// TestServerCloseDuringExchange: Close while a side-channel exchange holds
// a QP of its own (the client sent its record, got the server's, and never
// says "done") ends the exchange before the device goes: Close returns
// nil at once and Serve ErrClosed. Before, the teardown released the
// device under the exchange's QP and CQ and Close failed with EBUSY.
func TestServerCloseDuringExchange(t *testing.T) {
	r := newRXServer(t, withServe(func(o *server.ServeOptions) { o.Timeout = time.Minute }))
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("0000:000123:000001:00000000000000000000ffff0a630002\x00")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 52)); err != nil {
		t.Fatalf("the server's record: %v", err)
	}
	start := time.Now()
	if err := r.srv.Close(); err != nil {
		t.Errorf("Close with an exchange holding its QP: %v", err)
	}
	select {
	case err := <-r.serveErr:
		r.serveErr <- err // for r's cleanup
		if !errors.Is(err, server.ErrClosed) {
			t.Errorf("Serve: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still running 5 s after Close")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v", took)
	}
	st := r.srv.Stats()
	if st.ExchangeFailures != 1 || st.Exchanges != 0 {
		t.Errorf("exchanges %d failed %d; want 0 and 1\n%s", st.Exchanges, st.ExchangeFailures, r.log())
	}
}
