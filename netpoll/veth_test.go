//go:build linux

package netpoll

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/netpoll/vethns"
)

// vethPair makes two namespaces joined by a veth, or skips when it cannot.
func vethPair(t *testing.T, cfg vethns.Config) *vethns.Pair {
	t.Helper()
	if err := vethns.Check(); err != nil {
		t.Skipf("no network namespaces: %v", err)
	}
	p, err := vethns.New(cfg)
	if err != nil {
		t.Fatalf("veth pair: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing the veth pair: %v", err)
		}
	})
	return p
}

// Every backend, in namespace B, serves UDP (echoed with SendTo) and a TCP
// stream from namespace A across a veth with NAPI (GRO) on.
func TestVethBackends(t *testing.T) {
	p := vethPair(t, vethns.Config{Queues: 2, GRO: true})
	for k, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			port := 5000 + k
			var d *Driver
			rec := &recorder{}
			rec.echo = func(id ConnID, b []byte, from netip.AddrPort) {
				if from.IsValid() {
					d.SendTo(id, b, from)
				}
			}
			d = newDriver(t, cfg, rec)
			var udp *net.UDPConn
			var ln net.Listener
			err := p.B.Do(func() (err error) {
				if udp, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.B.Addr, uint16(port)))); err != nil {
					return err
				}
				ln, err = net.Listen("tcp4", netip.AddrPortFrom(p.B.Addr, uint16(port)).String())
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer udp.Close()
			defer ln.Close()
			idUDP := addConn(t, d, udp)
			run(t, d)

			var uc *net.UDPConn
			var tc net.Conn
			err = p.A.Do(func() (err error) {
				if uc, err = net.DialUDP("udp4", nil, udp.LocalAddr().(*net.UDPAddr)); err != nil {
					return err
				}
				tc, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer uc.Close()
			defer tc.Close()
			sc, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			idTCP := addConn(t, d, sc.(*net.TCPConn))

			for i := range 100 {
				msg := fmt.Sprintf("ping %d", i)
				uc.Write([]byte(msg))
				uc.SetReadDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 64)
				n, err := uc.Read(buf)
				if err != nil || string(buf[:n]) != msg {
					t.Fatalf("echo %d: %q, %v", i, buf[:n], err)
				}
			}
			want := bytes.Repeat([]byte("0123456789abcdef"), 8<<10)
			if _, err := tc.Write(want); err != nil {
				t.Fatal(err)
			}
			tc.Close()
			eventually(t, "the stream and its end", 10*time.Second, func() bool {
				for _, c := range rec.closed() {
					if c.id == idTCP && c.reason == PeerClosed {
						return true
					}
				}
				return false
			})
			if got := rec.streamBytes(idTCP); !bytes.Equal(got, want) {
				t.Errorf("stream: %d bytes, want %d", len(got), len(want))
			}
			for _, m := range rec.messages() {
				if m.id == idUDP && m.from != uc.LocalAddr().(*net.UDPAddr).AddrPort() {
					t.Fatalf("datagram from %v, want %v", m.from, uc.LocalAddr())
				}
			}
		})
	}
}

// Per-queue over a 4-queue veth with GRO on: one representative per real
// NAPI id, every datagram delivered, far fewer reads than sockets per pass,
// and a stale cache (queues "moved") relearned by the periodic refresh.
func TestPerQueueVeth(t *testing.T) {
	p := vethPair(t, vethns.Config{Queues: 4, GRO: true})
	if on, err := p.B.GRO(); err != nil || !on {
		t.Fatalf("GRO on B: %v, %v", on, err)
	}
	const nsock = 16
	rec := &recorder{}
	d := newDriver(t, Config{Backend: RecvBusy, PerQueue: true}, rec)
	servers := make([]*net.UDPConn, nsock)
	clients := make([]*net.UDPConn, nsock)
	ids := make([]ConnID, nsock)
	if err := p.B.Do(func() (err error) {
		for i := range servers {
			if servers[i], err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.B.Addr, uint16(6000+i)))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.A.Do(func() (err error) {
		for i := range clients {
			if clients[i], err = net.DialUDP("udp4", nil, servers[i].LocalAddr().(*net.UDPAddr)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range servers {
		defer servers[i].Close()
		defer clients[i].Close()
		ids[i] = addConn(t, d, servers[i])
	}
	pollUntil := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for len(rec.messages()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %d of %d datagrams", what, len(rec.messages()), n)
			}
			if err := d.Poll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range clients {
		c.Write([]byte("first"))
	}
	pollUntil("the first round", nsock)

	// What the kernel says now, independently of the driver's cache.
	truth := map[uint32][]ConnID{}
	for _, id := range ids {
		napi := incomingNAPIID(d.slots[id.slot()].fd)
		if napi == 0 {
			t.Skipf("socket %d has NAPI id 0 after receiving over the veth: veth only delivers through its per-queue NAPI "+
				"when GRO is on at the receiver and TSO off at the sender (veth_skb_is_eligible_for_gro); this kernel did not", id)
		}
		truth[napi] = append(truth[napi], id)
	}
	if len(truth) < 2 {
		t.Fatalf("all %d flows landed on one queue (%v): the test cannot tell representatives apart", nsock, truth)
	}
	t.Logf("NAPI ids: %v", truth)
	// Let the periodic look-again learn the ids the first pick saw as 0.
	for range relookEvery {
		d.Poll()
	}
	checkReps := func() {
		t.Helper()
		if len(d.pq.reps) != len(truth) {
			t.Errorf("%d representatives %v for %d queues %v", len(d.pq.reps), d.pq.reps, len(truth), truth)
		}
		got := map[uint32]bool{}
		for _, i := range d.pq.reps {
			napi := incomingNAPIID(d.slots[i].fd)
			if got[napi] {
				t.Errorf("two representatives for NAPI id %d", napi)
			}
			got[napi] = true
		}
		for napi := range truth {
			if !got[napi] {
				t.Errorf("NAPI id %d has no representative", napi)
			}
		}
	}
	checkReps()

	const rounds = 5
	for range rounds {
		for _, c := range clients {
			c.Write([]byte("more"))
		}
	}
	pollUntil("the later rounds", nsock*(rounds+1))
	// Idle, a pass reads exactly one socket per queue (plain recv-busy
	// would read all 16), and epoll reports nothing else.
	for range 8 {
		d.Poll() // let any late NAPI pass settle
	}
	before := d.Stats()
	const idle = 100
	for range idle {
		d.Poll()
	}
	after := d.Stats()
	if reads := after.Reads - before.Reads; reads != idle*uint64(len(truth)) {
		t.Errorf("%d reads in %d idle passes, want %d (one per queue)", reads, idle, idle*len(truth))
	}
	if empty := after.EmptyReads - before.EmptyReads; empty != after.Reads-before.Reads {
		t.Errorf("idle passes read data: %d reads, %d empty", after.Reads-before.Reads, empty)
	}
	if w := after.EpollWaits - before.EpollWaits; w != idle {
		t.Errorf("%d epoll waits in %d passes", w, idle)
	}

	// RSS "moves" every queue: the cache now wrongly says all sockets share
	// one queue. The periodic refresh relearns the real ids.
	for i := range d.pq.napi {
		if d.slots[i].socket() {
			d.pq.napi[i] = 1
		}
	}
	d.pq.pick(d.slots, false)
	if len(d.pq.reps) != 1 {
		t.Fatalf("a cache claiming one queue gave representatives %v", d.pq.reps)
	}
	for d.pq.passes%refreshEvery != 0 {
		d.Poll()
	}
	checkReps()
	if slices.Contains(d.pq.napi, 1) {
		t.Errorf("a stale id survived the refresh: %v", d.pq.napi)
	}
}
