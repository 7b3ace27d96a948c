//go:build linux

package netpoll

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/netpoll/vethns"
)

// busyCQ is a completion queue that always has completions: a driver
// polling it never finds a pass empty, so never sleeps.
type busyCQ struct {
	ch     *eventfd
	drains int
}

func (b *busyCQ) Drain() (int, error) { b.drains++; return 1, nil }
func (b *busyCQ) Arm() error          { return nil }
func (b *busyCQ) FD() int             { return b.ch.fd }
func (b *busyCQ) Consume() error      { return nil }

// EpollBusy busy-polls the sockets' NIC queues while a completion queue
// keeps it from sleeping. Its sleeping wait (epoll_pwait2 with a timeout)
// is where the kernel busy-polls; a zero timeout skips that, so a pass that
// must not sleep polls each queue once with a non-blocking read instead.
// The veth in namespace B defers its interrupts to a 3 s timer, so a
// datagram arrives within the bound only if the queue is busy-polled.
func TestEpollBusyPollsSocketsWhileCQsBusy(t *testing.T) {
	p := vethPair(t, vethns.Config{GRO: true})
	if err := p.B.DeferNAPI(1000, 3*time.Second); err != nil {
		t.Fatalf("deferring the veth's interrupts: %v", err)
	}
	rec := &recorder{}
	d := newDriver(t, Config{Backend: EpollBusy, Wait: 200 * time.Microsecond}, rec)
	ch, err := newEventfd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.close)
	if _, err := d.AddCQ(&busyCQ{ch: ch}); err != nil {
		t.Fatal(err)
	}
	const port = 5400
	var udp *net.UDPConn
	if err := p.B.Do(func() (err error) {
		udp, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.B.Addr, port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	id := addConn(t, d, udp)
	run(t, d)
	var client *net.UDPConn
	if err := p.A.Do(func() (err error) {
		client, err = net.DialUDP("udp4", nil, udp.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// A socket's queue can be busy-polled once the socket knows it (its
	// NAPI id, from a received packet): the first datagram may wait for the
	// timer. Each later one waits for it too unless the queue is busy-polled.
	for k := range 6 {
		msg := fmt.Sprintf("datagram %d", k)
		bound := 1500 * time.Millisecond
		if k == 0 {
			bound = 10 * time.Second
		}
		start := time.Now()
		if _, err := client.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		for !rec.has(id, msg) {
			if time.Since(start) > bound {
				st := d.Stats()
				t.Fatalf("%q not received within %v while the CQ kept the loop busy (%d passes, %d completions, %d reads, %d sleeps): the socket's queue was not busy-polled",
					msg, bound, st.Passes, st.Completions, st.Reads, st.Parks)
			}
			time.Sleep(100 * time.Microsecond)
		}
		t.Logf("%s: %v", msg, time.Since(start))
	}
	if st := d.Stats(); st.Parks != 0 {
		t.Errorf("the loop slept %d times: the CQ did not keep it busy", st.Parks)
	}
}

// The other way round: sockets with data queued keep EpollBusy's waits
// from sleeping, and each pass still drains the completion queues from
// memory, so completions are never left behind the sockets.
func TestEpollBusyDrainsCQsWhileSocketsBusy(t *testing.T) {
	rec := &recorder{}
	d := newDriver(t, Config{Backend: EpollBusy, Wait: 10 * time.Second}, rec)
	cq := newFakeCQ(t)
	if _, err := d.AddCQ(cq); err != nil {
		t.Fatal(err)
	}
	c := udpListen(t)
	addConn(t, d, c)
	s := udpDial(t, c.LocalAddr())
	const passes = 50
	for range 2 * passes {
		if _, err := s.Write([]byte("busy")); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Poll(); err != nil { // installs both
		t.Fatal(err)
	}
	for k := range int64(passes) {
		before := len(rec.messages())
		cq.complete(1)
		start := time.Now()
		if err := d.Poll(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("pass %d took %v: it slept with data queued", k, took)
		}
		if got := cq.drained.Load(); got != k+1 {
			t.Fatalf("after pass %d with a socket busy: %d completions drained, want %d", k, got, k+1)
		}
		if len(rec.messages()) == before {
			t.Fatalf("pass %d read no datagram with %d queued", k, 2*passes)
		}
	}
}
