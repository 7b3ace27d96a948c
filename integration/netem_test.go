//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
)

// The faults on the wire: a netem qdisc on the egress of both veths, so
// that requests (rxe1 → rxe0) and ACKs (rxe0 → rxe1) both suffer it.
// RXEVM_FAULTS=1 (make faults) runs every stream at full size.

// faultFrames is the length of one faulted stream: short in the normal
// suite, ≥ 10⁵ frames with RXEVM_FAULTS=1.
func faultFrames(short int) int {
	if os.Getenv("RXEVM_FAULTS") == "1" {
		return 100000
	}
	return short
}

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

// setNetem puts a netem qdisc with attrs at the root of both veths; the
// test's cleanup removes it. changeNetem changes it in place.
func setNetem(t *testing.T, attrs netlink.NetemQdiscAttrs) {
	t.Helper()
	for _, q := range netemQdiscs(t, attrs) {
		if err := netlink.QdiscReplace(q); err != nil {
			t.Fatalf("netem %+v on link %d: %v", attrs, q.LinkIndex, err)
		}
		t.Cleanup(func() {
			if err := netlink.QdiscDel(q); err != nil {
				t.Errorf("remove netem from link %d: %v", q.LinkIndex, err)
			}
		})
	}
}

func changeNetem(t *testing.T, attrs netlink.NetemQdiscAttrs) {
	t.Helper()
	for _, q := range netemQdiscs(t, attrs) {
		if err := netlink.QdiscReplace(q); err != nil {
			t.Fatalf("netem %+v on link %d: %v", attrs, q.LinkIndex, err)
		}
	}
}

func netemQdiscs(t *testing.T, attrs netlink.NetemQdiscAttrs) []*netlink.Netem {
	t.Helper()
	var qs []*netlink.Netem
	for _, name := range []string{"veth0", "veth1"} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT}, attrs))
	}
	return qs
}

// rxeCounters is a snapshot of the recovery counters of rxe0 (the
// responder) and rxe1 (the requester).
type rxeCounters struct {
	retry, seqErr, rnr   uint64 // rxe1: completer_retry_err, rcvd_seq_err, rcvd_rnr_err
	dup, outOfSeq, icrcs uint64 // rxe0: duplicate_request, out_of_seq_request; ICRC drops are not counted by 6.1's rxe
}

func readRxeCounters(t *testing.T) rxeCounters {
	devs := devices(t, 2)
	return rxeCounters{
		retry:    hwCounter(t, devs[1], "completer_retry_err"),
		seqErr:   hwCounter(t, devs[1], "rcvd_seq_err"),
		rnr:      hwCounter(t, devs[1], "rcvd_rnr_err"),
		dup:      hwCounter(t, devs[0], "duplicate_request"),
		outOfSeq: hwCounter(t, devs[0], "out_of_seq_request"),
	}
}

func (c rxeCounters) minus(o rxeCounters) rxeCounters {
	return rxeCounters{c.retry - o.retry, c.seqErr - o.seqErr, c.rnr - o.rnr, c.dup - o.dup, c.outOfSeq - o.outOfSeq, 0}
}

// faultStream streams total frames of 1..9000 bytes on 4 channels from
// rocev2-send to the server and checks that they arrived complete, in
// order and byte-identical. It returns the frame rate and the counters.
func faultStream(t *testing.T, total int, sendArgs ...string) (float64, rxeCounters) {
	t.Helper()
	r := newRXServer(t, nil)
	c0 := readRxeCounters(t)
	start := time.Now()
	r.send(30*time.Minute, append([]string{"-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4"}, sendArgs...)...)
	r.waitFrames(uint64(total), time.Minute)
	el := time.Since(start)
	d := readRxeCounters(t).minus(c0)
	st := r.srv.Stats()
	c := r.checker(0)
	c.Expect(uint64(total))
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
	if st.BadOpcode+st.BadLength+st.BadWRID != 0 {
		t.Errorf("bad completions: opcode %d length %d wrid %d", st.BadOpcode, st.BadLength, st.BadWRID)
	}
	return float64(total) / el.Seconds(), d
}

// TestNetemServerStream streams through the server under each fault; the
// log has one README table row per fault (and one for the clean link).
func TestNetemServerStream(t *testing.T) {
	total := faultFrames(2000)
	var rows []string
	row := func(name string, fps float64, d rxeCounters) {
		rows = append(rows, fmt.Sprintf("| %s | %d | %.0f | %d | %d | %d | %d |", name, total, fps, d.retry, d.seqErr, d.dup, d.outOfSeq))
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

// blackout drops every packet on both veths for d, starting once the
// server has delivered after frames.
func blackout(t *testing.T, r *rxServer, after uint64, d time.Duration) {
	t.Helper()
	r.waitFrames(after, 5*time.Minute)
	setNetem(t, netlink.NetemQdiscAttrs{Loss: 100})
	time.Sleep(d)
	changeNetem(t, netlink.NetemQdiscAttrs{})
}

// TestNetemBlackoutWithinRetries: a 2 s blackout mid-stream, shorter than
// the sender's retry budget (ACK timeout 18 ≈ 1.07 s, 6 retries): the
// stream goes on where it stopped and arrives complete.
func TestNetemBlackoutWithinRetries(t *testing.T) {
	total := faultFrames(3000)
	r := newRXServer(t, nil)
	c0 := readRxeCounters(t)
	snd := startPeer(t, 30*time.Minute, "rocev2-send", r.sendArgs("-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4", "-timeout", "18")...)
	blackout(t, r, uint64(total/3), 2*time.Second)
	snd.wait(t)
	r.waitFrames(uint64(total), time.Minute)
	d := readRxeCounters(t).minus(c0)
	c := r.checker(0)
	c.Expect(uint64(total))
	if c.Frames != uint64(total) || c.Lost != 0 || c.Corrupt != 0 || c.Duplicate != 0 {
		t.Errorf("checker %+v", c)
	}
	if d.retry == 0 {
		t.Errorf("no retransmission timeout during a 2 s blackout")
	}
	t.Logf("2 s blackout within the retry budget: %d frames complete; sender completer_retry_err %d", total, d.retry)
}

// TestNetemBlackoutBeyondRetries: a 2 s blackout longer than the sender's
// retry budget (ACK timeout 14 ≈ 67 ms, 6 retries ≈ 0.5 s): the sender's
// QP fails with RETRY_EXC_ERR; the server ends that session, reports which
// frames arrived (every one the sender saw acknowledged, in order, none
// after a gap), and a new sender connects and streams without a restart.
func TestNetemBlackoutBeyondRetries(t *testing.T) {
	total := faultFrames(3000)
	r := newRXServer(t, nil)
	snd := startPeer(t, 10*time.Minute, "rocev2-send", r.sendArgs("-n", strconv.Itoa(total), "-s", "1-9000", "-c", "4", "-timeout", "14")...)
	blackout(t, r, uint64(total/3), 2*time.Second)
	<-snd.done
	out := snd.out.String()
	// 6.1's rxe completes the request that ran out of retries with
	// RETRY_EXC_ERR; 6.12's was seen reporting the flush of the queue
	// behind it first (WR_FLUSH_ERR). Either is the QP in the error state.
	if snd.err == nil || !(strings.Contains(out, "RETRY_EXC_ERR") || strings.Contains(out, "WR_FLUSH_ERR")) {
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
	r.send(10*time.Minute, "-n", "1000", "-s", "1-9000", "-C", "16")
	st = r.waitStats(time.Minute, "the new sender's frames", func(s *server.Stats) bool { return s.ChannelFrames[16] >= 1000 })
	if b := r.checker(1); b.Frames != 1000 || b.Lost != 0 || b.Corrupt != 0 || st.Sessions != 2 {
		t.Errorf("new sender: checker %+v, sessions %d", b, st.Sessions)
	}
}

// TestNetemRCPingpong runs rc-pingpong against rdma-core's ibv_rc_pingpong,
// both ways, with -c (every byte checked), under 2 % loss. (Under 5 % it
// passed twice and once hung for the whole 5 minutes, rc-pingpong client
// against the C server: both ends retry without limit on rxe, retry count 7.)
func TestNetemRCPingpong(t *testing.T) {
	setNetem(t, netlink.NetemQdiscAttrs{Loss: 2})
	for _, r := range []pingpongRun{
		{server: cPingpong, client: goPingpong, size: 8192, iters: 100, port: 18650, validate: true},
		{server: goPingpong, client: cPingpong, size: 5000, iters: 100, port: 18651, validate: true, serverEvents: true},
	} {
		srvOut, cliOut := r.run(t, 5*time.Minute)
		r.checkPair(t, srvOut, cliOut)
	}
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
