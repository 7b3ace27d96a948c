//go:build linux

package netpoll

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeCQ is a CompletionQueue with a real pollable channel (an eventfd) and
// the hardware's arming rule: a completion raises a channel event only if
// the queue is armed, and the event disarms it. A completion that arrives
// before Arm raises nothing.
type fakeCQ struct {
	ch        *eventfd
	ready     atomic.Int64 // completions waiting "in memory"
	armed     atomic.Bool
	drained   atomic.Int64
	arms      atomic.Int64
	consumes  atomic.Int64
	failDrain atomic.Bool
	// beforeArm runs inside Arm, before the queue counts as armed.
	beforeArm func()
}

var errFakeDrain = errors.New("fake CQ: drain failed")

func newFakeCQ(t *testing.T) *fakeCQ {
	t.Helper()
	ch, err := newEventfd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.close)
	return &fakeCQ{ch: ch}
}

// complete is the "hardware" adding n completions.
func (f *fakeCQ) complete(n int64) {
	f.ready.Add(n)
	if f.armed.CompareAndSwap(true, false) {
		f.ch.signal()
	}
}

func (f *fakeCQ) Drain() (int, error) {
	if f.failDrain.Load() {
		return 0, errFakeDrain
	}
	n := f.ready.Swap(0)
	f.drained.Add(n)
	return int(n), nil
}

func (f *fakeCQ) Arm() error {
	f.arms.Add(1)
	if f.beforeArm != nil {
		f.beforeArm()
	}
	f.armed.Store(true)
	return nil
}

func (f *fakeCQ) FD() int { return f.ch.fd }

func (f *fakeCQ) Consume() error {
	f.consumes.Add(1)
	f.ch.reset()
	return nil
}

// Every backend polls every completion queue from memory on every pass.
func TestCQDrainedEveryPass(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			d := newDriver(t, cfg, &recorder{})
			cq := newFakeCQ(t)
			if _, err := d.AddCQ(cq); err != nil {
				t.Fatal(err)
			}
			for k := int64(1); k <= 5; k++ {
				cq.complete(k)
				if err := d.Poll(); err != nil {
					t.Fatal(err)
				}
				if got, want := cq.drained.Load(), k*(k+1)/2; got != want {
					t.Fatalf("after pass %d: drained %d, want %d", k, got, want)
				}
			}
			if s := d.Stats(); s.Completions != 15 {
				t.Errorf("Stats.Completions %d, want 15", s.Completions)
			}
		})
	}
}

// The arm-then-poll-again rule: a completion that lands after the last
// drain but before the arm raises no event, so a backend that slept right
// after arming would never see it (Park: until something else happens;
// EpollBusy: until its 10 s timeout).
func TestArmThenPollAgain(t *testing.T) {
	for _, cfg := range []Config{
		{Backend: Park, ParkAfter: 1},
		{Backend: EpollBusy, Wait: 10 * time.Second},
	} {
		t.Run(cfg.name(), func(t *testing.T) {
			d := newDriver(t, cfg, &recorder{})
			cq := newFakeCQ(t)
			var first atomic.Bool
			cq.beforeArm = func() {
				if first.CompareAndSwap(false, true) {
					cq.complete(1) // not armed yet: no event
				}
			}
			if _, err := d.AddCQ(cq); err != nil {
				t.Fatal(err)
			}
			run(t, d)
			eventually(t, "the completion that arrived before arming", 2*time.Second, func() bool { return cq.drained.Load() == 1 })

			// Now the loop sleeps, armed: it must stay asleep (no spinning)
			// until the channel fires.
			eventually(t, "the loop to sleep", 2*time.Second, func() bool { return d.Stats().Parks > 0 })
			time.Sleep(20 * time.Millisecond)
			p0 := d.Stats().Passes
			time.Sleep(50 * time.Millisecond)
			if p1 := d.Stats().Passes; p1 != p0 {
				t.Errorf("%d passes while it should have been asleep", p1-p0)
			}
			cq.complete(2) // armed: raises the event
			eventually(t, "the completion that woke it", 2*time.Second, func() bool { return cq.drained.Load() == 3 })
			if cq.consumes.Load() == 0 {
				t.Errorf("the channel event was never consumed")
			}
			if s := d.Stats(); s.Parked <= 0 {
				t.Errorf("Stats.Parked %v after sleeping", s.Parked)
			}
		})
	}
}

// A parked loop wakes for a datagram, and Run returns promptly when its
// context ends while parked.
func TestParkWakes(t *testing.T) {
	rec := &recorder{}
	d := newDriver(t, Config{Backend: Park, ParkAfter: 4}, rec)
	c := udpListen(t)
	addConn(t, d, c)
	stop := run(t, d)
	eventually(t, "the loop to park", 2*time.Second, func() bool { return d.Stats().Parks > 0 })
	udpDial(t, c.LocalAddr()).Write([]byte("wake up"))
	eventually(t, "the datagram", 2*time.Second, func() bool { return len(rec.messages()) == 1 })
	eventually(t, "the loop to park again", 2*time.Second, func() bool { return d.Stats().Parks > 1 })
	start := time.Now()
	stop()
	if took := time.Since(start); took > time.Second {
		t.Errorf("Run took %v to return after its context ended", took)
	}
}

// A completion queue whose Drain fails is closed alone; the other queue and
// the socket keep working, and the driver stops calling the failed one.
func TestCQFailureClosesOnlyIt(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			rec := &recorder{}
			d := newDriver(t, cfg, rec)
			bad, good := newFakeCQ(t), newFakeCQ(t)
			idBad, err := d.AddCQ(bad)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.AddCQ(good); err != nil {
				t.Fatal(err)
			}
			sock := udpListen(t)
			addConn(t, d, sock)
			d.Poll()
			bad.failDrain.Store(true)
			d.Poll()
			cl := rec.closed()
			if len(cl) != 1 || cl[0].id != idBad || cl[0].reason != Failed || !errors.Is(cl[0].err, errFakeDrain) {
				t.Fatalf("closes %+v; want the bad queue Failed with its error", cl)
			}
			bad.failDrain.Store(false)
			bad.complete(1)
			good.complete(4)
			udpDial(t, sock.LocalAddr()).Write([]byte("x"))
			for range 20 {
				d.Poll()
			}
			if bad.drained.Load() != 0 || good.drained.Load() != 4 || len(rec.messages()) != 1 {
				t.Errorf("bad drained %d (want 0), good %d (want 4), %d datagrams (want 1)",
					bad.drained.Load(), good.drained.Load(), len(rec.messages()))
			}
		})
	}
}

// Remove hands a queue back: OnClosed, no more calls, channel left open.
func TestCQRemove(t *testing.T) {
	rec := &recorder{}
	d := newDriver(t, Config{Backend: Park, ParkAfter: 1, Wait: time.Millisecond}, rec)
	cq := newFakeCQ(t)
	id, err := d.AddCQ(cq)
	if err != nil {
		t.Fatal(err)
	}
	d.Poll()
	if err := d.Remove(id); err != nil {
		t.Fatal(err)
	}
	d.Poll()
	if cl := rec.closed(); len(cl) != 1 || cl[0] != (closeEvent{id, Removed, nil}) {
		t.Fatalf("closes %+v", cl)
	}
	cq.complete(1)
	arms := cq.arms.Load()
	d.Poll()
	d.Poll()
	if cq.drained.Load() != 0 || cq.arms.Load() != arms {
		t.Errorf("the removed queue was still polled or armed")
	}
	d.Close()
	if _, err := unix.FcntlInt(uintptr(cq.FD()), unix.F_GETFD, 0); err != nil {
		t.Errorf("the driver closed the queue's channel: %v", err)
	}
}

// Park spins (no sleeping) while completions keep coming.
func TestParkSpinsWhileBusy(t *testing.T) {
	d := newDriver(t, Config{Backend: Park, ParkAfter: 8, Wait: time.Millisecond}, &recorder{})
	cq := newFakeCQ(t)
	d.AddCQ(cq)
	for range 100 {
		cq.complete(1)
		d.Poll()
	}
	if s := d.Stats(); s.Parks != 0 || s.Completions != 100 {
		t.Errorf("stats %+v: parked while busy", s)
	}
}
