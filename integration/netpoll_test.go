//go:build integration

package integration

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/netpoll"
	"github.com/pureverbs/pureverbs/netpoll/cqsource"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

type noSockets struct{}

func (noSockets) OnData(netpoll.ConnID, []byte, netip.AddrPort)       {}
func (noSockets) OnClosed(netpoll.ConnID, netpoll.CloseReason, error) {}

// A real rxe CQ in netpoll's loop: polled from memory while SENDs flow,
// armed and parked on its channel between bursts, woken by the next
// completion. Every receive completes exactly once and is re-posted from the
// loop, as server/ does.
func TestNetpollParksOnRxeCQ(t *testing.T) {
	for _, backend := range []netpoll.Backend{netpoll.Park, netpoll.EpollSpin} {
		t.Run(backend.String(), func(t *testing.T) {
			a, b := pair(t, false, endOpts{channel: true, cap: qp.Cap{MaxSendWR: 64, MaxRecvWR: 64}})
			const slots, bursts, perBurst = 32, 6, 40
			for i := 0; i < slots; i++ {
				if err := b.qp.PostRecv([]qp.RecvWR{{ID: uint64(i), SGEs: []uverbs.SGE{sge(b, i*64, 64)}}}); err != nil {
					t.Fatal(err)
				}
			}
			var got atomic.Int64
			seen := make([]int, bursts*perBurst)
			var bad atomic.Int64
			repost := make([]qp.RecvWR, 1)
			deliver := func(wcs []cq.WC) {
				for _, wc := range wcs {
					if wc.Status != cq.Success || wc.Opcode != cq.OpRecv || wc.Flags&cq.WithImm == 0 || int(wc.Imm) >= len(seen) {
						bad.Add(1)
						continue
					}
					seen[wc.Imm]++
					got.Add(1)
					slot := int(wc.WRID)
					repost[0] = qp.RecvWR{ID: wc.WRID, SGEs: []uverbs.SGE{sge(b, slot*64, 64)}}
					if err := b.qp.PostRecv(repost); err != nil {
						bad.Add(1)
					}
				}
			}
			src, err := cqsource.New(b.cq, make([]cq.WC, 16), deliver)
			if err != nil {
				t.Fatal(err)
			}
			d, err := netpoll.New(netpoll.Config{Backend: backend, ParkAfter: 64}, noSockets{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if _, err := d.AddCQ(src); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()

			wc := make([]cq.WC, perBurst)
			for burst := 0; burst < bursts; burst++ {
				for i := 0; i < perBurst; i++ {
					n := burst*perBurst + i
					if err := a.qp.PostSend([]qp.SendWR{{ID: uint64(n), Opcode: qp.SendWithImm, Flags: qp.Signaled,
						Imm: uint32(n), SGEs: []uverbs.SGE{sge(a, 0, 48)}}}); err != nil {
						t.Fatal(err)
					}
					if i%16 == 15 { // stay within the receiver's 32 slots
						pollWait(t, a.cq, wc, 16, 10*time.Second)
					}
				}
				pollWait(t, a.cq, wc, perBurst%16, 10*time.Second)
				deadline := time.Now().Add(10 * time.Second)
				for got.Load() < int64((burst+1)*perBurst) && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond) // idle: time for the loop to park
			}
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil {
				t.Fatalf("run: %v", err)
			}
			st := d.Stats()
			t.Logf("%v: %+v", backend, st)
			if got.Load() != bursts*perBurst || bad.Load() != 0 {
				t.Fatalf("delivered %d of %d, %d bad", got.Load(), bursts*perBurst, bad.Load())
			}
			for n, c := range seen {
				if c != 1 {
					t.Fatalf("message %d delivered %d times", n, c)
				}
			}
			if st.Completions != bursts*perBurst {
				t.Errorf("stats count %d completions, want %d", st.Completions, bursts*perBurst)
			}
			if backend == netpoll.Park && (st.Parks < bursts-1 || st.Parked == 0) {
				t.Errorf("the park backend parked %d times (%v) over %d idle gaps", st.Parks, st.Parked, bursts)
			}
			if b.cq.Unacked() != 0 {
				t.Errorf("%d completion events left unacknowledged", b.cq.Unacked())
			}
		})
	}
}
