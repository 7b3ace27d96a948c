//go:build integration

package integration

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// faultFrames is the length of one faulted stream: short in the normal
// suite, ≥ 10⁵ frames with RXEVM_FAULTS=1.
func faultFrames(short int) int {
	if os.Getenv("RXEVM_FAULTS") == "1" {
		return 100000
	}
	return short
}

// faultLimit bounds one wait of a faulted stream: short in the normal
// suite (sized for 2 000-3 000 frames at the slowest measured 24 frames/s),
// 90 minutes with RXEVM_FAULTS=1.
func faultLimit(short time.Duration) time.Duration {
	if os.Getenv("RXEVM_FAULTS") == "1" {
		return 90 * time.Minute
	}
	return short
}

// setNetem puts a netem qdisc with attrs at the root of links (by default
// both veths); the test's cleanup removes it. changeNetem changes it in
// place.
func setNetem(t *testing.T, attrs netlink.NetemQdiscAttrs, links ...string) {
	t.Helper()
	for _, q := range netemQdiscs(t, attrs, links) {
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

func changeNetem(t *testing.T, attrs netlink.NetemQdiscAttrs, links ...string) {
	t.Helper()
	for _, q := range netemQdiscs(t, attrs, links) {
		if err := netlink.QdiscReplace(q); err != nil {
			t.Fatalf("netem %+v on link %d: %v", attrs, q.LinkIndex, err)
		}
	}
}

func netemQdiscs(t *testing.T, attrs netlink.NetemQdiscAttrs, links []string) []*netlink.Netem {
	t.Helper()
	if len(links) == 0 {
		links = []string{"veth0", "veth1"}
	}
	var qs []*netlink.Netem
	for _, name := range links {
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

// passThrough puts a netem qdisc that changes nothing on both veths, for a
// test that changes it mid-stream (changeNetem, in place). Grafting a
// qdisc onto a veth that rxe is sending on is itself a fault on 6.12: a
// packet sent during the swap meets the deactivated qdisc's drop, rxe
// counts send_err, fails the WQE and moves the QP to ERROR, and its
// sender sees WR_FLUSH_ERR (the flush reports first) — the blackout
// test's failure on 6.12 (rxe1 send_err+1, rxe0 send_err+14, no retry
// counted, 49 frames into a 2 s blackout). 6.1's rxe treats it as a
// dropped packet.
func passThrough(t *testing.T) { setNetem(t, netlink.NetemQdiscAttrs{}) }

// blackout drops every packet on both veths for d, starting once the
// server has delivered after frames; passThrough must have been set
// before the stream began. It returns how long the loss really lasted: a
// loaded TCG guest can run the test late by seconds.
func blackout(t *testing.T, r *rxServer, after uint64, d time.Duration) time.Duration {
	t.Helper()
	r.waitFrames(after, faultLimit(2*time.Minute))
	changeNetem(t, netlink.NetemQdiscAttrs{Loss: 100})
	began := time.Now()
	time.Sleep(d)
	changeNetem(t, netlink.NetemQdiscAttrs{})
	return time.Since(began)
}

// pinNeighbours makes each veth's entry for the other's address permanent
// for the test: the ping-pong tools connect (modify to RTR, which resolves
// the peer's MAC) under loss, and a lost ARP packet failed it there
// ("Failed to modify QP to RTR", seen at 10 % loss); ARP is not what the
// test is about.
func pinNeighbours(t *testing.T) {
	t.Helper()
	l0, err := netlink.LinkByName("veth0")
	if err != nil {
		t.Fatal(err)
	}
	l1, err := netlink.LinkByName("veth1")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []netlink.Neigh{
		{LinkIndex: l0.Attrs().Index, IP: net.ParseIP("10.99.0.2"), HardwareAddr: l1.Attrs().HardwareAddr},
		{LinkIndex: l1.Attrs().Index, IP: net.ParseIP("10.99.0.1"), HardwareAddr: l0.Attrs().HardwareAddr},
	} {
		n.Family, n.State = netlink.FAMILY_V4, netlink.NUD_PERMANENT
		if err := netlink.NeighSet(&n); err != nil {
			t.Fatalf("permanent neighbour %v on link %d: %v", n.IP, n.LinkIndex, err)
		}
		t.Cleanup(func() {
			if err := netlink.NeighDel(&n); err != nil {
				t.Errorf("remove neighbour %v from link %d: %v", n.IP, n.LinkIndex, err)
			}
		})
	}
}
