package server

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
)

// TestRingTracking: positions as a shared ring (surf's dispatcher: one
// counter across channels) or one per channel, with gaps, duplicates and
// wraps named — the old per-channel-only tracker counted every frame of a
// shared ring on 4 channels as a gap.
func TestRingTracking(t *testing.T) {
	type frame struct {
		ch  uint8
		pos uint32
	}
	shared := func(n, channels int, wrap uint32) []frame {
		var fs []frame
		for i := range n {
			fs = append(fs, frame{uint8(i % channels), uint32(i) % wrap})
		}
		return fs
	}
	without := func(fs []frame, drop ...int) []frame {
		var out []frame
		for i, f := range fs {
			if !slices.Contains(drop, i) {
				out = append(out, f)
			}
		}
		return out
	}
	cases := []struct {
		name   string
		mode   RingMode
		size   uint32
		frames []frame
		want   RingCounts
	}{
		{"shared ring over 4 channels", RingShared, 0, shared(1000, 4, 1<<24), RingCounts{}},
		{"shared ring wrapping at 256, size unknown", RingShared, 0, shared(1000, 4, 256), RingCounts{Wraps: 3}},
		{"shared ring wrapping at 256, size 256", RingShared, 256, shared(1000, 4, 256), RingCounts{Wraps: 3}},
		{"a gap of 3", RingShared, 0, []frame{{0, 5}, {1, 6}, {2, 10}, {3, 11}}, RingCounts{Gaps: 1, Missing: 3}},
		{"a gap across the wrap (size known)", RingShared, 8, []frame{{0, 6}, {0, 1}, {0, 2}}, RingCounts{Gaps: 1, Missing: 2, Wraps: 1}},
		{"a duplicate and a replay", RingShared, 0, []frame{{0, 5}, {0, 5}, {0, 6}, {0, 3}, {0, 7}}, RingCounts{Duplicates: 2}},
		{"per channel", RingPerChannel, 0, []frame{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {1, 3}}, RingCounts{Gaps: 1, Missing: 1}},
		{"per channel, a shared sender", RingPerChannel, 0, shared(8, 2, 1<<24), RingCounts{Gaps: 6, Missing: 6}},
		// Position 0 of the second lap lost (a 256 ring over 4 channels):
		// one gap, one missing, every wrap counted, the rest in order.
		{"position 0 of a wrap lost, size unknown", RingShared, 0, without(shared(1000, 4, 256), 256), RingCounts{Gaps: 1, Missing: 1, Wraps: 3}},
		{"position 0 of a wrap lost, size 256", RingShared, 256, without(shared(1000, 4, 256), 256), RingCounts{Gaps: 1, Missing: 1, Wraps: 3}},
		{"positions 0-2 of a wrap lost, size unknown", RingShared, 0, without(shared(600, 4, 256), 512, 513, 514), RingCounts{Gaps: 1, Missing: 3, Wraps: 2}},
		// The ambiguous case with the size unknown: the frames at the end of
		// the ring and at 0 lost; only 0..p-1 are known to be missing.
		{"the ring's end and 0 lost, size unknown", RingShared, 0, without(shared(300, 1, 256), 250, 251, 252, 253, 254, 255, 256), RingCounts{Gaps: 1, Missing: 1, Wraps: 1}},
		{"the ring's end and 0 lost, size 256", RingShared, 256, without(shared(300, 1, 256), 250, 251, 252, 253, 254, 255, 256), RingCounts{Gaps: 1, Missing: 7, Wraps: 1}},
		{"a jump ahead by more than half a known ring", RingShared, 8, []frame{{0, 1}, {0, 7}, {0, 0}, {0, 1}}, RingCounts{Gaps: 1, Missing: 5, Wraps: 1}},
		{"a duplicate of the last frame, then in order", RingShared, 0, []frame{{0, 5}, {0, 6}, {0, 6}, {0, 7}, {0, 8}}, RingCounts{Duplicates: 1}},
		{"off", RingOff, 0, []frame{{0, 9}, {0, 1}}, RingCounts{}},
		{"outside the ring", RingShared, 16, []frame{{0, 1}, {0, 20}}, RingCounts{Gaps: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPool(make([]byte, 64), 0, 0, 64, 1, -1, func() error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			c := counters{ringMode: tc.mode, ringSize: tc.size}
			for _, f := range tc.frames {
				c.frame(f.ch, f.pos, 1)
			}
			if got := c.snapshot(p).Ring; got != tc.want {
				t.Errorf("ring counts %+v, want %+v", got, tc.want)
			}
		})
	}
	// A new connection starts the ring afresh.
	p, _ := newPool(make([]byte, 64), 0, 0, 64, 1, -1, func() error { return nil })
	defer p.close()
	c := counters{}
	c.frame(0, 100, 1)
	c.newConnection()
	c.frame(0, 0, 1)
	if got := c.snapshot(p).Ring; got != (RingCounts{}) {
		t.Errorf("after a new connection: %+v", got)
	}
}

// TestHandlerPanic: a panicking Handler is recovered and counted, its
// frame released (also when it released it itself first), and the loop
// goes on with nothing lost; with PanicStops the step ends with a
// *HandlerPanicError naming the value.
func TestHandlerPanic(t *testing.T) {
	var got []uint32
	r := newSimRig(t, 4, 64, func(f Frame) {
		got = append(got, f.Position())
		switch f.Position() % 3 {
		case 0:
			panic("boom")
		case 1:
			f.Release()
			panic(errors.New("after release"))
		}
		f.Release()
	})
	for i := range 30 {
		if !r.send(qp.SendWithImm, 0, 8, uint32(i)<<8) {
			t.Fatal("sender queue full")
		}
		if _, err := r.l.step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	for range 3 {
		r.l.step()
	}
	st := r.c.snapshot(r.p)
	if len(got) != 30 || st.HandlerPanics != 20 || st.Frames != 30 {
		t.Fatalf("%d frames handled, %d panics counted, %d frames; want 30, 20, 30", len(got), st.HandlerPanics, st.Frames)
	}
	if st.Downstream != 0 || st.Posted != 4 {
		t.Fatalf("downstream %d posted %d after the panics: a panicking Handler's frame stayed held", st.Downstream, st.Posted)
	}

	r2 := newSimRig(t, 4, 64, func(f Frame) { panic("stop here") })
	r2.l.panicStops = true
	r2.send(qp.SendWithImm, 0, 8, 0)
	_, err := r2.l.step()
	var hp *HandlerPanicError
	if !errors.As(err, &hp) || hp.Value != "stop here" || len(hp.Stack) == 0 {
		t.Fatalf("step with PanicStops: %v", err)
	}
	if st := r2.c.snapshot(r2.p); st.Downstream != 0 || st.HandlerPanics != 1 {
		t.Fatalf("after the stop: downstream %d panics %d", st.Downstream, st.HandlerPanics)
	}
}

// TestSlowHandler: a Handler that takes its time loses nothing: the sender
// waits on RNR (here the simulator's retry), every frame arrives in order.
func TestSlowHandler(t *testing.T) {
	const total = 200
	var got []uint32
	r := newSimRig(t, 4, 64, func(f Frame) {
		time.Sleep(200 * time.Microsecond)
		got = append(got, f.Position())
		f.Release()
	})
	errc := make(chan error, 1)
	go func() { errc <- r.l.run() }()
	for i := range total {
		for !r.send(qp.SendWithImm, 0, 8, uint32(i)<<8) {
			time.Sleep(50 * time.Microsecond)
		}
	}
	waitFor(t, func() bool { r.q.dev.Process(); r.q.notify(); return r.c.frames.Load() == total })
	r.stop.Store(true)
	r.p.wake()
	<-errc
	for i, p := range got {
		if p != uint32(i) {
			t.Fatalf("frame %d has position %d", i, p)
		}
	}
	if st := r.c.snapshot(r.p); st.Ring != (RingCounts{}) || len(got) != total {
		t.Fatalf("%d frames, ring %+v", len(got), st.Ring)
	}
}

// TestIdleTimeout: a loop that receives nothing for IdleTimeout ends with
// ErrIdle; one fed more often than that keeps going.
func TestIdleTimeout(t *testing.T) {
	r := newSimRig(t, 4, 64, func(f Frame) { f.Release() })
	r.l.idle = 300 * time.Millisecond
	r.l.spin = time.Millisecond
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- r.l.run() }()
	for i := range 10 {
		time.Sleep(50 * time.Millisecond)
		r.send(qp.SendWithImm, 0, 8, uint32(i)<<8)
		select {
		case err := <-errc:
			t.Fatalf("the loop ended after %v with traffic every 50 ms: %v", time.Since(start), err)
		default:
		}
	}
	fed := time.Now()
	err := within(t, "the idle loop's end", errc)
	if !errors.Is(err, ErrIdle) {
		t.Fatalf("idle loop ended with %v", err)
	}
	if d := time.Since(fed); d < 250*time.Millisecond {
		t.Fatalf("idle after %v, the timeout is 300 ms", d)
	}
	if r.c.frames.Load() != 10 {
		t.Fatalf("%d frames", r.c.frames.Load())
	}
}
