//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// slotOf is the slot an id names, whatever its generation.
func slotOf(id ConnID) int { return id.slot() }

// gatedCloses is a Handler whose OnClosed blocks until the test opens the
// gate, so the test can act while a close is being reported.
type gatedCloses struct {
	recorder
	entered chan ConnID
	gate    chan struct{}
}

func (g *gatedCloses) OnClosed(id ConnID, reason CloseReason, err error) {
	g.entered <- id
	<-g.gate
	g.recorder.OnClosed(id, reason, err)
}

// A slot is handed out again only after OnClosed for its previous occupant
// has returned: an Add made while that OnClosed runs gets another slot.
func TestOnClosedBeforeSlotReuse(t *testing.T) {
	g := &gatedCloses{entered: make(chan ConnID, 8), gate: make(chan struct{})}
	d := newDriver(t, Config{Backend: EpollSpin}, g)
	id := addConn(t, d, udpListen(t))
	run(t, d)
	if err := d.Remove(id); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-g.entered:
		if got != id {
			t.Fatalf("OnClosed(%v), want %v", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnClosed not called within 5s of Remove")
	}
	during := addConn(t, d, udpListen(t))
	close(g.gate)
	if slotOf(during) == slotOf(id) {
		t.Fatalf("Add during OnClosed(%v) got %v: the slot was reused before its close was reported", id, during)
	}
	eventually(t, "the close recorded", 5*time.Second, func() bool { return len(g.closed()) == 1 })
	after := addConn(t, d, udpListen(t))
	if slotOf(after) != slotOf(id) {
		t.Errorf("Add after OnClosed(%v) returned got %v: the freed slot was not reused", id, after)
	}
}

// An id names one source only: once that source is gone, its id is
// ErrNoSource for Remove and Send even after the slot holds another source,
// which the stale id does not touch.
func TestStaleIDIsNoSource(t *testing.T) {
	rec := &recorder{}
	d := newDriver(t, Config{Backend: EpollSpin}, rec)
	old := addConn(t, d, udpListen(t))
	if err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(old); err != nil {
		t.Fatal(err)
	}
	if err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	c := udpListen(t)
	cur := addConn(t, d, c)
	if slotOf(cur) != slotOf(old) {
		t.Fatalf("the new source got slot %d, want the freed %d", slotOf(cur), slotOf(old))
	}
	if cur == old {
		t.Fatalf("the new source got the old source's id %v", old)
	}
	if err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(old); !errors.Is(err, ErrNoSource) {
		t.Errorf("Remove(stale %v): %v, want ErrNoSource", old, err)
	}
	if _, err := d.Send(old, []byte("x")); !errors.Is(err, ErrNoSource) {
		t.Errorf("Send(stale %v): %v, want ErrNoSource", old, err)
	}
	udpDial(t, c.LocalAddr()).Write([]byte("still here"))
	for range 100 {
		if err := d.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if !rec.has(cur, "still here") {
		t.Errorf("the slot's new source lost its data after a stale Remove: closes %+v", rec.closed())
	}
	if cl := rec.closed(); len(cl) != 1 || cl[0].id != old {
		t.Errorf("closes %+v, want only the old source's", cl)
	}
}

// abaHandler checks the id contract under churn: data and closes only for
// ids that are live, one close per id, and every stale id refused by Send.
type abaHandler struct {
	d *Driver

	mu     sync.Mutex
	live   map[ConnID]bool // added and not yet reported closed
	closed map[ConnID]int
	stale  []ConnID // reported closed: never valid again
	got    map[ConnID]int
	peer   int // closes with PeerClosed
	errs   []string
}

func (h *abaHandler) fail(format string, args ...any) {
	h.errs = append(h.errs, fmt.Sprintf(format, args...))
}

func (h *abaHandler) OnData(id ConnID, p []byte, _ netip.AddrPort) {
	h.mu.Lock()
	if !h.live[id] {
		h.fail("OnData for %v, which is not live (%q)", id, p)
	}
	h.got[id]++
	var st ConnID
	if len(h.stale) > 0 {
		st = h.stale[rand.IntN(len(h.stale))]
	}
	h.mu.Unlock()
	if st != 0 {
		if _, err := h.d.Send(st, p); !errors.Is(err, ErrNoSource) {
			h.mu.Lock()
			h.fail("Send(stale %v) from a handler: %v, want ErrNoSource", st, err)
			h.mu.Unlock()
		}
	}
}

func (h *abaHandler) OnClosed(id ConnID, reason CloseReason, _ error) {
	// Widen the window in which a slot freed too early would be handed out.
	time.Sleep(50 * time.Microsecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.live[id] {
		h.fail("OnClosed for %v, which is not live", id)
	}
	h.closed[id]++
	if reason == PeerClosed {
		h.peer++
	}
	delete(h.live, id)
	h.stale = append(h.stale, id)
}

// added records a new id, checking that no live source holds its slot.
func (h *abaHandler) added(id ConnID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addedLocked(id)
}

func (h *abaHandler) addedLocked(id ConnID) {
	for l := range h.live {
		if slotOf(l) == slotOf(id) {
			h.fail("Add returned %v while %v still held slot %d (its OnClosed had not returned)", id, l, slotOf(id))
		}
	}
	if h.closed[id] > 0 {
		h.fail("Add returned %v, an id already closed", id)
	}
	h.live[id] = true
}

func (h *abaHandler) received(id ConnID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[id]
}

func (h *abaHandler) randomStale() ConnID {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.stale) == 0 {
		return 0
	}
	return h.stale[rand.IntN(len(h.stale))]
}

// The ABA stress test: goroutines add and remove sockets while the loop runs
// and streams data into them, and others keep removing ids that are gone
// (while their slots are taken again by new sources). A stale id is always
// ErrNoSource, never removes or receives for a slot's new occupant, every
// source is closed exactly once, and OnClosed always returns before its slot
// is reused. Run with -race.
func TestABAStress(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			h := &abaHandler{live: map[ConnID]bool{}, closed: map[ConnID]int{}, got: map[ConnID]int{}}
			d := newDriver(t, cfg, h)
			h.d = d
			run(t, d)
			const workers, rounds = 4, 40
			var wg sync.WaitGroup
			var stop atomic.Bool
			var staleRemoves atomic.Int64
			// Stale removers.
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						st := h.randomStale()
						if st == 0 {
							time.Sleep(10 * time.Microsecond)
							continue
						}
						runtime.Gosched()
						if err := d.Remove(st); !errors.Is(err, ErrNoSource) {
							h.mu.Lock()
							h.fail("Remove(stale %v): %v, want ErrNoSource", st, err)
							h.mu.Unlock()
						}
						staleRemoves.Add(1)
					}
				}()
			}
			var churn sync.WaitGroup
			for w := range workers {
				churn.Add(1)
				go func() {
					defer churn.Done()
					for k := range rounds {
						if k%3 == 2 {
							// A stream whose peer hangs up: the loop closes
							// it (PeerClosed) while the others churn.
							peerClosed(t, d, h, []byte("stream data"))
							continue
						}
						c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
						if err != nil {
							t.Error(err)
							return
						}
						id, err := d.AddConn(c)
						if err != nil {
							c.Close()
							t.Errorf("AddConn: %v", err)
							return
						}
						h.added(id)
						s, err := net.DialUDP("udp4", nil, c.LocalAddr().(*net.UDPAddr))
						if err != nil {
							t.Error(err)
							return
						}
						for range 1 + (w+k)%3 {
							s.Write([]byte("data"))
						}
						s.Close()
						if k%2 == 0 { // let the data in first; otherwise race it
							deadline := time.Now().Add(2 * time.Second)
							for h.received(id) == 0 && time.Now().Before(deadline) {
								time.Sleep(20 * time.Microsecond)
							}
						}
						if err := d.Remove(id); err != nil {
							t.Errorf("Remove(live %v): %v", id, err)
						}
						c.Close()
					}
				}()
			}
			churn.Wait()
			eventually(t, "every source closed", 10*time.Second, func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				return len(h.live) == 0 && len(h.closed) == workers*rounds
			})
			stop.Store(true)
			wg.Wait()
			h.mu.Lock()
			defer h.mu.Unlock()
			for id, n := range h.closed {
				if n != 1 {
					h.fail("%v closed %d times", id, n)
				}
			}
			for i, e := range h.errs {
				if i == 20 {
					t.Errorf("... and %d more", len(h.errs)-i)
					break
				}
				t.Error(e)
			}
			if staleRemoves.Load() == 0 {
				t.Error("no stale Remove was tried")
			}
			if h.peer == 0 {
				t.Error("no source was closed by its peer")
			}
			t.Logf("%d sources (%d closed by the peer), %d stale removes, %d deliveries to %d ids", len(h.closed), h.peer, staleRemoves.Load(), sum(h.got), len(h.got))
		})
	}
}

// peerClosed adds one end of a socketpair, writes data into the other end
// and closes it, so the loop reads the data and then end-of-file.
func peerClosed(t *testing.T, d *Driver, h *abaHandler, data []byte) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Error(err)
		return
	}
	// Held while adding, so the close cannot be reported before the id is
	// recorded (the loop never holds the driver's lock while calling us).
	h.mu.Lock()
	id, err := d.AddFD(fds[0])
	if err == nil {
		h.addedLocked(id)
	}
	h.mu.Unlock()
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		t.Errorf("AddFD: %v", err)
		return
	}
	unix.Write(fds[1], data)
	unix.Close(fds[1])
}

func sum(m map[ConnID]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
