//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/server/framecheck"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The faults on the wire: a netem qdisc on the egress of both veths, so
// that requests (rxe1 → rxe0) and ACKs (rxe0 → rxe1) both suffer it.
// RXEVM_FAULTS=1 (make faults) runs every stream at full size.

// wireFault is one netem setting and its name in the README table.
type wireFault struct {
	name  string
	netem netlink.NetemQdiscAttrs
}

var wireFaults = []wireFault{
	{"loss 1%", netlink.NetemQdiscAttrs{Loss: 1}},
	{"loss 5%", netlink.NetemQdiscAttrs{Loss: 5}},
	// 5 % duplicates broke 6.1's rxe on amd64 too (REM_INV_REQ_ERR after
	// 1 694 of 2 000 frames, see the README): 1 % is what the suite asks.
	{"duplicate 1%", netlink.NetemQdiscAttrs{Duplicate: 1}},
	{"reorder 10% delay 1ms", netlink.NetemQdiscAttrs{ReorderProb: 10, Latency: 1000}},
	{"corrupt 1%", netlink.NetemQdiscAttrs{CorruptProb: 1}},
}

// faultStream streams total frames of 1..9000 bytes on 4 channels from
// rocev2-send to the server and checks that they arrived complete, in
// order and byte-identical. It returns the frame rate and the counters.
func faultStream(t *testing.T, total int, sendArgs ...string) (float64, rxeCounters) {
	t.Helper()
	r := newRXServer(t)
	c0 := readRxeCounters(t)
	faultDiagnosis(t, r)
	start := time.Now()
	r.send(faultLimit(4*time.Minute), append([]string{"-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4"}, sendArgs...)...)
	r.waitFrames(uint64(total), time.Minute)
	el := time.Since(start)
	d := readRxeCounters(t).minus(c0)
	st := r.srv.Stats()
	c := r.checker(0)
	c.Expect(uint64(total))
	if rxe61Defect(t, c, uint64(total)) {
		if st.Frames != c.Frames || st.Ring.Gaps+st.Ring.Missing+st.Ring.Wraps != 0 || st.Ring.Duplicates > c.Duplicate {
			t.Errorf("server %d frames, ring positions %+v; checker %+v", st.Frames, st.Ring, c)
		}
	} else {
		if st.Frames != uint64(total) || c.Frames != uint64(total) || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 {
			t.Errorf("server %d frames; checker %+v", st.Frames, c)
		}
		for ch := range 4 {
			if st.ChannelFrames[ch] != uint64(total/4) {
				t.Errorf("channel %d: %d frames", ch, st.ChannelFrames[ch])
			}
		}
		if st.Ring != (server.RingCounts{}) {
			t.Errorf("ring positions: %+v, want no gap, duplicate or wrap", st.Ring)
		}
	}
	if st.BadOpcode+st.BadLength+st.BadWRID != 0 {
		t.Errorf("bad completions: opcode %d length %d wrid %d", st.BadOpcode, st.BadLength, st.BadWRID)
	}
	return float64(total) / el.Seconds(), d
}

// faultDiagnosis logs, if the test fails, what tells the server's part in
// the failure from rxe's: both devices' counters since now, the server's
// receive-side state and error completions, its log, the checker and the
// kernel's messages since now (all of them if the buffer wrapped).
func faultDiagnosis(t *testing.T, r *rxServer) {
	t.Helper()
	devs := devices(t, 2)
	h0, h1 := hwCounters(t, devs[0]), hwCounters(t, devs[1])
	k0 := len(kernelMessages())
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		km := kernelMessages()
		if len(km) >= k0 {
			km = km[k0:]
		}
		st := r.srv.Stats()
		var errs []string
		for s, n := range st.Errors {
			if n != 0 {
				errs = append(errs, fmt.Sprintf("%v %d", cq.Status(s), n))
			}
		}
		r.mu.Lock()
		c := r.checkers[0]
		r.mu.Unlock()
		t.Logf("%s counters: %s\n%s counters: %s\nserver: frames %d, ring %+v, error completions [%s], bad wrid %d opcode %d length %d, posted %d held %d low mark %d, sessions %d ended %d\nchecker: %+v\nserver log:\n%s\nkernel messages:\n%s",
			devs[0], counterDiff(h0, hwCounters(t, devs[0])), devs[1], counterDiff(h1, hwCounters(t, devs[1])),
			st.Frames, st.Ring, strings.Join(errs, ", "), st.BadWRID, st.BadOpcode, st.BadLength, st.Posted, st.Held, st.PostedLowMark, st.Sessions, st.SessionEnds,
			c, r.log(), km)
	})
}

// kernelMessages returns the kernel's log buffer (/dev/kmsg, read without
// waiting for more).
func kernelMessages() string {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err.Error()
	}
	defer unix.Close(fd)
	var out strings.Builder
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EPIPE {
			continue // a record was overwritten while reading: go on with the next
		}
		if err != nil || n <= 0 {
			return out.String()
		}
		out.Write(buf[:n])
	}
}

// rxe61Defect reports whether c, the check of a stream of total frames
// under faults, shows only rxe 6.1's known retransmission defect: every
// frame arrived, in order, none lost, but at most 3 were delivered twice
// or delivered once with a wrong payload (a retransmission rebuilt from the
// wrong place). Seen on 6.1 under reorder 10 % (one duplicate), corrupt
// 1 % (one bad payload) and after a blackout (one duplicate), and on arm64
// 6.1 with C perftest at both ends (see the README); the same streams pass
// on 6.12. On 6.2 and later it is always false, so the checks stay strict.
// It still fails a fourth duplicate and any lost frame (seen with rocev2-send
// made to send one frame 4 extra times, or to skip one), but on 6.1 it
// hides up to 3 wrong deliveries of any cause: the same sender repeating
// one frame 3 times passed there.
func rxe61Defect(t *testing.T, c framecheck.Checker, total uint64) bool {
	t.Helper()
	if kernelAtLeast(t, 6, 2) || c.Duplicate+c.Corrupt == 0 || c.Duplicate+c.Corrupt > 3 || c.Lost != 0 || c.Frames != total+c.Duplicate {
		return false
	}
	t.Logf("rxe 6.1's retransmission defect: of %d frames, %d delivered twice and %d with a wrong payload, none lost (strict on 6.2+)", total, c.Duplicate, c.Corrupt)
	return true
}

// TestNetemServerStream streams through the server under each fault; the
// log has one README table row per fault (and one for the clean link).
//
// On arm64 (tcgShort) each stream is 500 frames, not 2 000: six streams
// took 96 s there. 500 frames of 1 to 9 000 B are about 2 400 request
// packets (MTU 1 024), so 1 % loss still drops some 25 of them (the check
// that the sender recovered something), and every fault still meets
// hundreds of frames; the amd64 suites stream 2 000, RXEVM_FAULTS=1
// 100 000 everywhere.
func TestNetemServerStream(t *testing.T) {
	total := faultFrames(tcgFrames(2000, 500))
	var rows []string
	// Each row is logged as soon as it is measured too: a full-size run
	// that is stopped part-way still leaves the rows it finished.
	row := func(name string, fps float64, d rxeCounters) {
		rows = append(rows, fmt.Sprintf("| %s | %d | %.0f | %d | %d | %d | %d |", name, total, fps, d.retry, d.seqErr, d.dup, d.outOfSeq))
		t.Logf("row: %s", rows[len(rows)-1])
	}
	fps, d := faultStream(t, total)
	row("none", fps, d)
	for _, f := range wireFaults {
		t.Run(strings.NewReplacer(" ", "_", "%", "").Replace(f.name), func(t *testing.T) {
			setNetem(t, f.netem)
			fps, d := faultStream(t, total)
			if f.netem.Loss > 0 && d.retry+d.seqErr == 0 {
				t.Errorf("%s: the sender recovered nothing (completer_retry_err and rcvd_seq_err both 0): is netem on?", f.name)
			}
			row(f.name, fps, d)
		})
	}
	t.Logf("\n| fault (both veths) | frames | frames/s | sender completer_retry_err | sender rcvd_seq_err | server duplicate_request | server out_of_seq_request |\n|---|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

// ackTimeout is the RC ACK timeout of attribute code c: 4.096 µs × 2^c.
func ackTimeout(c uint) time.Duration { return time.Duration(4096<<c) * time.Nanosecond }

// senderRetries is rocev2-send's retry_cnt. rxe counts one retry per
// expiry of the retransmission timer without progress and fails the QP at
// the expiry after the last retry, so a blackout fails the sender between
// senderRetries and senderRetries+1 timeouts after it began (the timer
// may have been armed up to one timeout before): the budget.
const senderRetries = 6

// TestNetemRetryBudget measures that budget for ACK timeout 18 (1.07 s): a
// blackout that does not end fails the sender's QP 6.4 to 7.5 s after it
// began, with RETRY_EXC_ERR and one retry_exceeded_err. Measured: 7.62 to
// 7.67 s on 6.12 (10.2 and 13.6 s in two runs of a loaded guest), 7.70 s
// on 6.1.
func TestNetemRetryBudget(t *testing.T) {
	const code = 18
	r := newRXServer(t)
	passThrough(t)
	devs := devices(t, 2)
	h1 := hwCounters(t, devs[1])
	snd := startPeer(t, faultLimit(3*time.Minute), "rocev2-send", r.sendArgs("-n", "3000", "-s", "1-9000", "-c", "4", "-timeout", strconv.Itoa(code))...)
	exited := make(chan time.Time, 1)
	go func() { <-snd.done; exited <- time.Now() }()
	r.waitFrames(1000, faultLimit(2*time.Minute))
	changeNetem(t, netlink.NetemQdiscAttrs{Loss: 100})
	began := time.Now()
	var at time.Time
	select {
	case at = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("the sender still runs 60 s into a blackout")
	}
	took, to := at.Sub(began), ackTimeout(code)
	out := snd.out.String()
	d := counterDiff(h1, hwCounters(t, devs[1]))
	t.Logf("ACK timeout %d (%v), retry_cnt %d: the sender failed %v (%.1f timeouts) after the blackout began; %s counters: %s\n%s",
		code, to, senderRetries, took.Round(time.Millisecond), float64(took)/float64(to), devs[1], d, out)
	if snd.err == nil || !strings.Contains(out, "RETRY_EXC_ERR") {
		t.Errorf("sender: %v", snd.err)
	}
	if !strings.Contains(" "+d+" ", " retry_exceeded_err+1 ") {
		t.Errorf("rxe did not count one retry_exceeded_err: %s", d)
	}
	// Below the budget the QP must live; the upper bound only leaves room
	// for a slow guest.
	if took < senderRetries*to-100*time.Millisecond || took > (senderRetries+1)*to+10*time.Second {
		t.Errorf("the QP failed %v into the blackout; the budget is %v to %v", took, senderRetries*to, (senderRetries+1)*to)
	}
}

// TestNetemBlackoutWithinRetries: a 2 s blackout mid-stream, well inside
// the sender's retry budget (TestNetemRetryBudget): ACK timeout 20 (4.29 s)
// and 6 retries fail the QP no sooner than 25.8 s into a blackout, room
// for the stalls of a loaded TCG guest (blackout returns the loss's real
// length, checked against the budget). The stream goes on where it stopped
// and arrives complete; no device counts a send error. It failed on 6.12
// (WR_FLUSH_ERR) while the blackout grafted the netem qdisc mid-stream:
// see passThrough.
func TestNetemBlackoutWithinRetries(t *testing.T) {
	const code = 20
	total := faultFrames(3000)
	r := newRXServer(t)
	passThrough(t)
	c0 := readRxeCounters(t)
	devs := devices(t, 2)
	h0, h1 := hwCounters(t, devs[0]), hwCounters(t, devs[1])
	snd := startPeer(t, faultLimit(3*time.Minute), "rocev2-send", r.sendArgs("-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4", "-timeout", strconv.Itoa(code))...)
	lasted := blackout(t, r, uint64(total/3), 2*time.Second)
	budget := senderRetries * ackTimeout(code)
	<-snd.done
	if snd.err != nil {
		t.Fatalf("sender through a blackout of %v (budget %v): %v\n%s\n%s counters: %s\n%s counters: %s",
			lasted.Round(time.Millisecond), budget, snd.err, snd.out.String(), devs[0], counterDiff(h0, hwCounters(t, devs[0])), devs[1], counterDiff(h1, hwCounters(t, devs[1])))
	}
	if lasted >= budget {
		t.Errorf("the blackout lasted %v, not within the budget %v", lasted, budget)
	}
	for i, h := range []map[string]uint64{h0, h1} {
		if d := hwCounters(t, devs[i])["send_err"] - h["send_err"]; d != 0 {
			t.Errorf("%s counted %d send errors (a qdisc swapped under rxe?)", devs[i], d)
		}
	}
	r.waitFrames(uint64(total), time.Minute)
	d := readRxeCounters(t).minus(c0)
	c := r.checker(0)
	c.Expect(uint64(total))
	if !rxe61Defect(t, c, uint64(total)) && (c.Frames != uint64(total) || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0) {
		t.Errorf("checker %+v", c)
	}
	if d.retry == 0 {
		t.Errorf("no retransmission timeout during the blackout")
	}
	t.Logf("blackout of %v within the retry budget (%v): %d frames complete; sender completer_retry_err %d", lasted.Round(time.Millisecond), budget, total, d.retry)
}

// TestNetemBlackoutBeyondRetries: a 2 s blackout longer than the sender's
// retry budget (ACK timeout 14 ≈ 67 ms, 6 retries ≈ 0.5 s): the sender's
// QP fails with RETRY_EXC_ERR; the server ends that session, reports which
// frames arrived (every one the sender saw acknowledged, in order, none
// after a gap), and a new sender connects and streams without a restart.
func TestNetemBlackoutBeyondRetries(t *testing.T) {
	total := faultFrames(3000)
	r := newRXServer(t)
	passThrough(t)
	snd := startPeer(t, faultLimit(3*time.Minute), "rocev2-send", r.sendArgs("-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4", "-timeout", "14")...)
	blackout(t, r, uint64(total/3), 2*time.Second)
	<-snd.done
	out := snd.out.String()
	// rxe completes the request that ran out of retries with RETRY_EXC_ERR
	// on 6.1 and 6.12 alike; the WR_FLUSH_ERR once seen first on 6.12 was
	// the qdisc swapped under the sender (see passThrough).
	if snd.err == nil || !strings.Contains(out, "RETRY_EXC_ERR") {
		t.Fatalf("sender through a 2 s blackout: %v\n%s", snd.err, out)
	}
	var acked uint64
	if _, err := fmt.Sscanf(out[strings.Index(out, "sent "):], "sent %d frames", &acked); err != nil {
		t.Fatalf("sender printed no count: %v\n%s", err, out)
	}
	st := r.waitStats(30*time.Second, "the failed sender's session to end", func(s *server.Stats) bool { return s.SessionEnds == 1 })
	c := r.checker(0)
	// Frames [0, c.next) arrived, each once, in order; the sender saw
	// [0, acked) acknowledged, so acked ≤ arrived ≤ acked + send queue depth.
	if c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 || c.Frames < acked || c.Frames > acked+16 || st.Frames != c.Frames {
		t.Errorf("after the failed sender: checker %+v, server %d frames, sender acknowledged %d", c, st.Frames, acked)
	}
	if st.Ring.Gaps != 0 {
		t.Errorf("ring positions: %+v, want no gap", st.Ring)
	}
	t.Logf("2 s blackout beyond the retry budget: the sender failed after %d acknowledged frames; the server has frames 0..%d (%d), so frames %d..%d did not arrive",
		acked, c.Frames-1, c.Frames, c.Frames, total-1)
	r.send(3*time.Minute, "-n", "1000", "-s", "1-9000", "-C", "16")
	st = r.waitStats(time.Minute, "the new sender's frames", func(s *server.Stats) bool { return s.ChannelFrames[16] >= 1000 })
	if b := r.checker(1); !rxe61Defect(t, b, 1000) && (b.Frames != 1000 || b.Lost != 0 || b.Corrupt != 0 || b.Duplicate != 0) || st.Sessions != 2 {
		t.Errorf("new sender: checker %+v, sessions %d", b, st.Sessions)
	}
}

// TestNetemRCPingpong runs rc-pingpong against rdma-core's ibv_rc_pingpong,
// both ways, with -c (every byte checked), under 2 % loss, and the same
// pairs with C at both ends as the control.
//
// Under loss a run now and then gets stuck in rxe's transport, whichever
// ends run: one end's send reaches the other device but its ACK never
// comes back, and rxe retries without limit (it takes the C tools' retry
// count 7 so). Mostly it is the protocol's very end (C's, which
// rc-pingpong follows): the last message's ACK is lost, the end that
// received that message has nothing left to wait for, exits and destroys
// its QP, and the sender retransmits into a QP that no longer exists.
// Measured in the VM (6.1, 10 % loss, 10 runs per pair): C server with -e
// against C client 4 hangs, C against C polling 1, C server against the Go
// client 2 (one of them the Go client stuck), every one of that kind; that
// was the CI hang (Go server with -e). Once (10 % loss, Go server with -e)
// a run stuck mid-stream with both ends alive: the C client's 78th send had
// reached rxe0 and was never acknowledged. runUnderLoss recognises a stuck
// transport from rxe's counters and runs the pair again; any other stall
// or failure fails.
func TestNetemRCPingpong(t *testing.T) {
	const pingpongLoss = 2
	pinNeighbours(t)
	setNetem(t, netlink.NetemQdiscAttrs{Loss: pingpongLoss})
	var notes []string
	for _, r := range []pingpongRun{
		{server: cPingpong, client: goPingpong, size: 8192, iters: 100, port: 18650, validate: true},
		{server: goPingpong, client: cPingpong, size: 5000, iters: 100, port: 18651, validate: true, serverEvents: true},
		{server: cPingpong, client: cPingpong, size: 8192, iters: 100, port: 18652, validate: true},
		{server: cPingpong, client: cPingpong, size: 5000, iters: 100, port: 18653, validate: true, serverEvents: true},
	} {
		srvOut, cliOut, stuck := r.runUnderLoss(t, 3)
		r.checkPair(t, srvOut, cliOut)
		notes = append(notes, fmt.Sprintf("server %s (events %v), client %s: %d run(s) stuck in the transport first", r.server, r.serverEvents, r.client, stuck))
	}
	t.Logf("%v %% loss:\n%s", pingpongLoss, strings.Join(notes, "\n"))
}

// Bounds of one ping-pong run under loss: how long the message counts of
// both devices may stand still (one retransmission takes 67 ms to ~1 s
// here) before the run counts as stuck, and how long a run may take at
// all (3–15 s at 2 % loss on a loaded machine, ≤ 40 s at 10 %).
const (
	lossyStallLimit = 20 * time.Second
	lossyRunLimit   = 3 * time.Minute
)

// pingpongTally is what rxe counted on one device since a run began.
type pingpongTally struct {
	sends, recvs, retries uint64 // rdma_sends (acknowledged), rdma_recvs, completer_retry_err
}

// runUnderLoss runs the pair up to attempts times, until one run completes
// at both ends, and returns its outputs and how many runs before it got
// stuck in rxe's transport (see TestNetemRCPingpong). A run is stuck in
// the transport when the message counts stand still and one device's last
// send has been received by the other device (its rdma_recvs is one more
// than this device's rdma_sends) but never acknowledged: the processes
// play no part in that, only the two kernels. Any other stall, failure or
// timeout fails the test with rxe's counters, the stuck processes' kernel
// wait channels and stacks, and the Go ends' goroutines (SIGQUIT).
func (r pingpongRun) runUnderLoss(t *testing.T, attempts int) (serverOut, clientOut string, stuck int) {
	t.Helper()
	devs := devices(t, 2)
	for range attempts {
		before := [2]map[string]uint64{hwCounters(t, devs[0]), hwCounters(t, devs[1])}
		tally := func() (c [2]pingpongTally) {
			for i := range c {
				d := counterDelta(before[i], hwCounters(t, devs[i]))
				c[i] = pingpongTally{d["rdma_sends"], d["rdma_recvs"], d["completer_retry_err"]}
			}
			return c
		}
		srv, cli := r.start(t, lossyRunLimit+time.Minute)
		ends := [2]*peer{srv, cli} // on devs[0], devs[1]
		start, moved, last := time.Now(), time.Now(), tally()
		for {
			time.Sleep(time.Second)
			finished := 0
			for _, p := range ends {
				select {
				case <-p.done:
					finished++
					// A kernel that counts retries down ends a send that is
					// never acknowledged with RETRY_EXC_ERR (status 12)
					// instead of retrying for ever: judged as a stall below.
					if p.err != nil && !strings.Contains(p.out.String(), "(12) for wr_id 2") {
						r.failHang(t, fmt.Sprintf("%s failed: %v", p.name, p.err), ends, devs, before)
					}
				default:
				}
			}
			if finished == 2 && srv.err == nil && cli.err == nil {
				return srv.out.String(), cli.out.String(), stuck
			}
			now := tally()
			if now[0].sends != last[0].sends || now[0].recvs != last[0].recvs || now[1].sends != last[1].sends || now[1].recvs != last[1].recvs {
				moved, last = time.Now(), now
			}
			if time.Since(start) > lossyRunLimit {
				r.failHang(t, fmt.Sprintf("the run took over %v (counts %+v)", lossyRunLimit, now), ends, devs, before)
			}
			if finished == 2 || time.Since(moved) > lossyStallLimit {
				break
			}
		}
		c := tally()
		i := 0 // the device whose last send is outstanding
		if c[0].recvs == c[1].sends+1 {
			i = 1
		} else if c[1].recvs != c[0].sends+1 {
			r.failHang(t, fmt.Sprintf("no message moved for %v, and not for want of an ACK: rxe counted %s sends %d recvs %d, %s sends %d recvs %d",
				lossyStallLimit, devs[0], c[0].sends, c[0].recvs, devs[1], c[1].sends, c[1].recvs), ends, devs, before)
		}
		how := "its peer is still running (rxe 6.1 failing to recover mid-stream)"
		select {
		case <-ends[1-i].done:
			how = "its peer had finished and destroyed its QP (the lost final ACK)"
		default:
		}
		t.Logf("stuck in the transport: %s's send #%d reached %s (rdma_recvs %d) but was never acknowledged (rdma_sends %d, completer_retry_err +%d); %s; running the pair again",
			ends[i].name, c[i].sends+1, devs[1-i], c[1-i].recvs, c[i].sends, c[i].retries, how)
		for _, p := range ends {
			p.cmd.Process.Kill()
			<-p.done
		}
		stuck++
	}
	t.Fatalf("%d runs in a row got stuck", attempts)
	return "", "", stuck
}

// failHang fails the test for a hang or failure that is not a lost final
// ACK, after collecting what shows where each end is stuck.
func (r pingpongRun) failHang(t *testing.T, why string, ends [2]*peer, devs []string, before [2]map[string]uint64) {
	t.Helper()
	var b strings.Builder
	for i, p := range ends {
		fmt.Fprintf(&b, "%s counters since the start: %s\n", devs[i], counterDiff(before[i], hwCounters(t, devs[i])))
		select {
		case <-p.done:
			continue
		default:
		}
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", p.cmd.Process.Pid))
		stack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stack", p.cmd.Process.Pid))
		fmt.Fprintf(&b, "%s still running, kernel wait channel %q, stack:\n%s", p.name, wchan, stack)
		if p.name == goPingpong {
			p.cmd.Process.Signal(syscall.SIGQUIT) // the Go runtime prints every goroutine and exits
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
			}
		}
	}
	for _, p := range ends {
		p.cmd.Process.Kill()
		<-p.done
		fmt.Fprintf(&b, "%s %s:\n%s\n", p.name, strings.Join(p.cmd.Args[1:], " "), p.out.String())
	}
	t.Fatalf("%s\n%s", why, b.String())
}

// counterDelta is b − a for every counter of b.
func counterDelta(a, b map[string]uint64) map[string]uint64 {
	d := make(map[string]uint64, len(b))
	for k, v := range b {
		d[k] = v - a[k]
	}
	return d
}

// TestNetemReadWrite: RDMA WRITEs of 64 KiB and READs back, compared byte
// for byte, under 2 % loss in both directions (rxe's retry count 7: retry
// without limit, so every wait has a deadline).
func TestNetemReadWrite(t *testing.T) {
	const size, rounds = 65536, 20
	devs := devices(t, 2)
	a, b := openEnd(t, devs[1], endOpts{bufSize: 2 * size}), openEnd(t, devs[0], endOpts{bufSize: 2 * size})
	access := uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	for _, s := range []struct{ local, remote *qpEnd }{{a, b}, {b, a}} {
		q := s.local.qp
		if err := q.ToInit(qp.InitParams{Access: access}); err != nil {
			t.Fatal(err)
		}
		if err := q.ToRTR(qp.RTRParams{DestQPN: s.remote.qp.Num(), RQPSN: psn(s.remote.qp), PathMTU: s.local.port.ActiveMTU,
			DGID: s.remote.gid, SGID: s.local.sgid, MaxDestRdAtomic: 4}); err != nil {
			t.Fatal(err)
		}
		if err := q.ToRTS(qp.RTSParams{SQPSN: psn(q), MaxRdAtomic: 4, Timeout: 14, RetryCnt: 7}); err != nil {
			t.Fatal(err)
		}
	}
	remote := extraMR(t, b, size, uverbs.AccessLocalWrite|access)
	setNetem(t, netlink.NetemQdiscAttrs{Loss: 2})
	c0 := readRxeCounters(t)
	mem := a.buf.Bytes()
	wait := func(what string, id uint64, op cq.Opcode) {
		t.Helper()
		wantWC(t, what, pollWait(t, a.cq, make([]cq.WC, 1), 1, time.Minute)[0], id, cq.Success, op)
	}
	for i := range rounds {
		for j := range size {
			mem[j] = byte(i*31 + j*7)
			mem[size+j] = 0
		}
		post(t, a, qp.SendWR{ID: uint64(2 * i), Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, size)},
			RemoteAddr: remote.Addr(), RKey: remote.RKey()})
		wait("write", uint64(2*i), cq.OpRDMAWrite)
		post(t, a, qp.SendWR{ID: uint64(2*i + 1), Opcode: qp.RDMARead, Flags: qp.Signaled, SGEs: []uverbs.SGE{mustSGE(t, a.mr, size, size)},
			RemoteAddr: remote.Addr(), RKey: remote.RKey()})
		wait("read", uint64(2*i+1), cq.OpRDMARead)
		if !bytes.Equal(mem[:size], mem[size:2*size]) {
			t.Fatalf("round %d: the 64 KiB read back differ from what was written", i)
		}
	}
	d := readRxeCounters(t).minus(c0)
	t.Logf("%d WRITE+READ rounds of %d B under 2%% loss: requester completer_retry_err %d, rcvd_seq_err %d", rounds, size, d.retry, d.seqErr)
}
