package server

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/pureverbs/pureverbs/qp"
	"golang.org/x/sys/unix"
)

// TestHoldAcrossClose is rogue's teardown regression (#1276) on the pool:
// a frame held across Close keeps its bytes, its Release after Close
// re-posts nothing, and the slab is freed by the last Release, not before.
func TestHoldAcrossClose(t *testing.T) {
	held := make(chan Frame, 4)
	r := newSimRig(t, 4, 64, func(f Frame) { held <- f })
	copy(r.src, "first")
	copy(r.src[64:], "second")
	r.send(qp.SendWithImm, 0, 5, 0)
	r.send(qp.SendWithImm, 64, 6, 1<<8)
	if _, err := r.l.step(); err != nil {
		t.Fatal(err)
	}
	a, b := <-held, <-held
	r.p.close()
	if n := r.unmaps.Load(); n != 0 {
		t.Fatalf("slab freed by Close with 2 frames held")
	}
	if s, h := r.p.postedHeld(); s != 0 || h != 2 {
		t.Fatalf("after close: posted %d held %d, want 0 and 2", s, h)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if !bytes.Equal(a.Data(), []byte("first")) {
			t.Errorf("held frame changed: %q", a.Data())
		}
		a.Release()
		a.Release() // idempotent
	}()
	go func() {
		defer wg.Done()
		if !bytes.Equal(b.Data(), []byte("second")) {
			t.Errorf("held frame changed: %q", b.Data())
		}
		b.Release()
	}()
	wg.Wait()
	if n := r.unmaps.Load(); n != 1 {
		t.Fatalf("slab freed %d times after the last Release, want 1", n)
	}
	if len(r.p.returned) != 0 {
		t.Fatalf("a Release after Close queued a re-post")
	}
}

// TestCloseFreesIdleSlab: with nothing held, Close frees the slab at once.
func TestCloseFreesIdleSlab(t *testing.T) {
	r := newSimRig(t, 4, 64, func(f Frame) { f.Release() })
	r.p.close()
	r.p.close()
	if n := r.unmaps.Load(); n != 1 {
		t.Fatalf("slab freed %d times, want 1", n)
	}
}

// TestUseAfterRelease: Data on a released frame panics, a second Release
// does nothing, and a stale Frame — of any earlier delivery of the slot,
// released through it or a copy — never releases the slot's current frame
// (with two Frames per slot, the old pool did, two deliveries later).
func TestUseAfterRelease(t *testing.T) {
	held := make(chan Frame, 4)
	r := newSimRig(t, 1, 64, func(f Frame) { held <- f })
	var old []Frame
	for i := range 6 {
		r.send(qp.SendWithImm, 0, 3, uint32(i)<<8)
		r.l.step() // re-posts the released slot; the message lands in it
		r.l.step()
		g := <-held
		for _, f := range old {
			f.Release() // stale: must not release g
			if !g.Held() {
				t.Fatalf("delivery %d: a stale Release (from a frame %d deliveries older) released the slot's current frame", i, len(old))
			}
		}
		if _, h := r.p.postedHeld(); h != 1 {
			t.Fatalf("delivery %d: held %d, want 1", i, h)
		}
		copyOfG := g
		copyOfG.Release()
		if g.Held() {
			t.Fatal("a Release through a copy left the frame held")
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Error("Data after Release did not panic")
				}
			}()
			g.Data()
		}()
		old = append(old, g)
	}
	if st := r.c.snapshot(r.p); st.StaleReleases != 15 {
		t.Errorf("%d stale releases counted, want 15", st.StaleReleases)
	}
	var zero Frame
	zero.Release()
	if zero.Held() {
		t.Error("the zero Frame is held")
	}
}

// TestFrameAllocs: a message through the loop (poll, deliver, handler,
// Release, re-post) allocates nothing.
func TestFrameAllocs(t *testing.T) {
	r := newSimRig(t, 16, 256, func(f Frame) { f.Release() })
	i := uint32(0)
	allocs := testing.AllocsPerRun(2000, func() {
		r.send(qp.SendWithImm, 0, 100, i<<8|uint32(i&3))
		if n, err := r.l.step(); err != nil || n == 0 {
			t.Fatalf("step: %d, %v", n, err)
		}
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame, want 0", allocs)
	}
	if r.c.frames.Load() < 2000 {
		t.Fatalf("%d frames", r.c.frames.Load())
	}
}

// TestFrameAllocsChannel: the same through the Frames channel.
func TestFrameAllocsChannel(t *testing.T) {
	r := newSimRig(t, 16, 256, nil)
	i := uint32(0)
	allocs := testing.AllocsPerRun(2000, func() {
		r.send(qp.SendWithImm, 0, 100, i<<8)
		r.l.step()
		(<-r.frames).Release()
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame, want 0", allocs)
	}
}

// A slab that cannot be unmapped when Close frees it (nothing held) is
// Close's error, not dropped: the buffer refuses to unmap while its MR is
// still registered, after a deregistration that failed.
func TestPoolCloseReportsUnmap(t *testing.T) {
	slab := make([]byte, 4*64)
	p, err := newPool(slab, 0, 0, 64, 4, -1, func() error { return unix.EBUSY })
	if err != nil {
		t.Fatal(err)
	}
	if err := p.close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("close with nothing held = %v, want the unmap's EBUSY", err)
	}
	if err := p.close(); err != nil {
		t.Fatalf("second close = %v, want nil", err)
	}
}
