package server

import (
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
)

// BenchmarkLoopFrame is one message through the loop on rxesim: send,
// poll, deliver, Release, re-post.
func BenchmarkLoopFrame(b *testing.B) {
	r := newSimRig(b, 64, 4096, func(f Frame) { f.Release() })
	b.SetBytes(1024)
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		r.send(qp.SendWithImm, 0, 1024, i<<8)
		r.l.step()
		i++
	}
}

// BenchmarkWakeParked measures how long a parked loop takes to return
// after it is told to stop (Close's wake); the issue asks for < 10 ms.
func BenchmarkWakeParked(b *testing.B) {
	var worst, total time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		r := newSimRig(b, 2, 64, func(f Frame) { f.Release() })
		r.l.spin = -1
		done := make(chan struct{})
		go func() { r.l.run(); close(done) }()
		for !r.parked() {
			time.Sleep(20 * time.Microsecond)
		}
		b.StartTimer()
		t0 := time.Now()
		r.stop.Store(true)
		r.p.wake()
		<-done
		d := time.Since(t0)
		worst, total, n = max(worst, d), total+d, n+1
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n), "mean-µs")
	b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
}
