package pingpong

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// simEnd is one end of a simulated RC connection: a receive queue of
// limited capacity and a completion queue of work request IDs. A send
// consumes one of the peer's posted receives; a send with no receive
// waiting is what a broken credit scheme would cause (an RNR NAK on rxe).
type simEnd struct {
	peer     *simEnd
	capacity int
	posted   int
	cq       []uint64
	sends    int
	refills  int
	rnr      int
}

func (e *simEnd) PostRecv(n int) int {
	if room := e.capacity - e.posted; n > room {
		n = room
	}
	e.posted += n
	e.refills++
	return n
}

func (e *simEnd) PostSend() error {
	if e.peer.posted == 0 {
		e.rnr++
		return errors.New("no receive posted at the peer")
	}
	e.peer.posted--
	e.peer.cq = append(e.peer.cq, RecvWRID)
	e.cq = append(e.cq, SendWRID)
	e.sends++
	return nil
}

// pop takes up to two completions, as the C tool polls two at a time, in
// an order that varies between send and receive.
func (e *simEnd) pop(r *rand.Rand) []uint64 {
	n := min(len(e.cq), 1+r.IntN(2))
	if n == 2 && r.IntN(2) == 0 {
		e.cq[0], e.cq[1] = e.cq[1], e.cq[0]
	}
	out := append([]uint64(nil), e.cq[:n]...)
	e.cq = e.cq[n:]
	return out
}

func simPair(rxDepth, capacity, iters int) (*Pingpong, *Pingpong, *simEnd, *simEnd) {
	a, b := &simEnd{capacity: capacity}, &simEnd{capacity: capacity}
	a.peer, b.peer = b, a
	return &Pingpong{Q: a, Iters: iters, RxDepth: rxDepth}, &Pingpong{Q: b, Iters: iters, RxDepth: rxDepth}, a, b
}

func TestPingpongCredits(t *testing.T) {
	for _, tc := range []struct{ rxDepth, iters int }{{500, 1000}, {1, 50}, {2, 300}, {3, 1000}, {16, 10}, {4, 1}} {
		r := rand.New(rand.NewPCG(uint64(tc.rxDepth), uint64(tc.iters)))
		client, server, ca, sa := simPair(tc.rxDepth, tc.rxDepth, tc.iters)
		for _, p := range []*Pingpong{client, server} {
			if err := p.Fill(); err != nil {
				t.Fatal(err)
			}
		}
		if err := server.Start(false); err != nil {
			t.Fatal(err)
		}
		if err := client.Start(true); err != nil {
			t.Fatal(err)
		}
		for steps := 0; !client.Finished() || !server.Finished(); steps++ {
			if steps > 10*tc.iters+10 {
				t.Fatalf("rx %d iters %d: stuck: client %+v server %+v", tc.rxDepth, tc.iters, client, server)
			}
			p, e := client, ca
			if r.IntN(2) == 0 {
				p, e = server, sa
			}
			for _, id := range e.pop(r) {
				if err := p.Complete(id); err != nil {
					t.Fatalf("rx %d iters %d: %v", tc.rxDepth, tc.iters, err)
				}
			}
		}
		for name, p := range map[string]*Pingpong{"client": client, "server": server} {
			if p.scnt != tc.iters || p.rcnt != tc.iters {
				t.Errorf("rx %d iters %d: %s sent %d received %d", tc.rxDepth, tc.iters, name, p.scnt, p.rcnt)
			}
		}
		for name, e := range map[string]*simEnd{"client": ca, "server": sa} {
			if e.sends != tc.iters || e.rnr != 0 || len(e.cq) != 0 {
				t.Errorf("rx %d iters %d: %s posted %d sends, %d without a receive, %d completions left",
					tc.rxDepth, tc.iters, name, e.sends, e.rnr, len(e.cq))
			}
			// Receives are topped up when at most one is left.
			if wantRefills := 1 + refillsFor(tc.rxDepth, tc.iters); e.refills != wantRefills {
				t.Errorf("rx %d iters %d: %s posted receives %d times, want %d", tc.rxDepth, tc.iters, name, e.refills, wantRefills)
			}
		}
	}
}

// refillsFor counts the top-ups of a queue of depth d over n receives: the
// first after d-1 receives, then one every d-1 (every receive when d <= 2).
func refillsFor(d, n int) int {
	if d <= 2 {
		return n
	}
	return n / (d - 1)
}

func TestPingpongErrors(t *testing.T) {
	// A receive queue smaller than rx_depth fails as the C tool does.
	p, _, _, _ := simPair(8, 4, 10)
	if err := p.Fill(); err == nil || err.Error() != "Couldn't post receive (4)" {
		t.Errorf("fill = %v", err)
	}
	p, _, _, _ = simPair(4, 4, 10)
	if err := p.Fill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Complete(7); err == nil || err.Error() != "Completion for unknown wr_id 7" {
		t.Errorf("complete(7) = %v", err)
	}
	// The peer has no receive: the send error is reported.
	p.pending = RecvWRID
	if err := p.Start(true); err == nil {
		t.Error("start posted a send the peer could not take")
	}
}

type nopPoster struct{}

func (nopPoster) PostRecv(n int) int { return n }
func (nopPoster) PostSend() error    { return nil }

func TestCompleteAllocatesNothing(t *testing.T) {
	p := &Pingpong{Q: nopPoster{}, Iters: 1 << 30, RxDepth: 4}
	if err := p.Fill(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Complete(RecvWRID); err != nil {
			t.Fatal(err)
		}
		if err := p.Complete(SendWRID); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("complete allocates %v times per exchange", allocs)
	}
}

// OnWarm, where rc-pingpong starts counting allocations, runs once, when
// the WarmUp-th receive completes.
func TestOnWarm(t *testing.T) {
	calls, at := 0, 0
	p := &Pingpong{Q: nopPoster{}, Iters: 10, RxDepth: 4, WarmUp: 3}
	p.OnWarm = func() { calls++; at = p.Received() }
	if err := p.Fill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(true); err != nil {
		t.Fatal(err)
	}
	for !p.Finished() {
		for _, id := range []uint64{SendWRID, RecvWRID} {
			if err := p.Complete(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if calls != 1 || at != 3 {
		t.Errorf("OnWarm called %d times, at receive %d; want once, at 3", calls, at)
	}
}
