//go:build linux

package netpoll

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// counter is a Handler that allocates nothing.
type counter struct {
	data, bytes, closes atomic.Int64
}

func (c *counter) OnData(_ ConnID, p []byte, _ netip.AddrPort) {
	c.data.Add(1)
	c.bytes.Add(int64(len(p)))
}

func (c *counter) OnClosed(ConnID, CloseReason, error) { c.closes.Add(1) }

// allocRig is a driver with a UDP socket, a stream socket and a completion
// queue, plus the peer ends to feed them.
type allocRig struct {
	d           *Driver
	h           *counter
	cq          *fakeCQ
	udp, stream ConnID
	udpPeer     int
	streamPeer  int
	payload     []byte
}

func newAllocRig(t testing.TB, cfg Config) *allocRig {
	t.Helper()
	r := &allocRig{h: &counter{}, payload: make([]byte, 64)}
	d, err := New(cfg, r.h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	r.d = d

	srv, addr := rawUDPTB(t)
	if r.udp, err = d.AddFD(srv); err != nil {
		unix.Close(srv)
		t.Fatal(err)
	}
	if r.udpPeer, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(r.udpPeer) })
	if err := unix.Connect(r.udpPeer, &unix.SockaddrInet4{Addr: addr.Addr().As4(), Port: int(addr.Port())}); err != nil {
		t.Fatal(err)
	}

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.streamPeer = fds[1]
	t.Cleanup(func() { unix.Close(r.streamPeer) })
	// A small send buffer on the driver's end, so Send holds data back.
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(r.streamPeer, true); err != nil {
		t.Fatal(err)
	}
	if r.stream, err = d.AddFD(fds[0]); err != nil {
		unix.Close(fds[0])
		t.Fatal(err)
	}

	ch, err := newEventfd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.close)
	r.cq = &fakeCQ{ch: ch}
	if _, err := d.AddCQ(r.cq); err != nil {
		t.Fatal(err)
	}
	if err := d.Poll(); err != nil { // installs the sources
		t.Fatal(err)
	}
	return r
}

// rawUDPTB is rawUDP for tests and benchmarks.
func rawUDPTB(t testing.TB) (int, netip.AddrPort) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	in := sa.(*unix.SockaddrInet4)
	return fd, netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
}

// feedAndReceive sends one datagram, some stream bytes and one completion,
// then polls until all three arrived (bounded).
func (r *allocRig) feedAndReceive(t testing.TB) {
	data, cqs := r.h.data.Load(), r.cq.drained.Load()
	unix.Write(r.udpPeer, r.payload)
	unix.Write(r.streamPeer, r.payload)
	r.cq.complete(1)
	for range 10000 {
		if r.h.data.Load() >= data+2 && r.cq.drained.Load() > cqs {
			return
		}
		if err := r.d.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("data did not arrive: %d messages, %d completions", r.h.data.Load()-data, r.cq.drained.Load()-cqs)
}

// sendHeldBack sends total bytes on the stream in 16 KiB chunks, more than
// its kernel buffer holds, then reads them at the peer while polling until
// Send holds nothing back. It reports whether Send had to hold data back.
func (r *allocRig) sendHeldBack(t testing.TB, total int, chunk, sink []byte) bool {
	held := false
	for sent := 0; sent < total; sent += len(chunk) {
		if n, err := r.d.Send(r.stream, chunk); n != len(chunk) || err != nil {
			t.Fatalf("Send: %d, %v", n, err)
		}
		if n, _ := r.d.Buffered(r.stream); n > 0 {
			held = true
		}
	}
	got := 0
	for range 100000 {
		if err := r.d.Poll(); err != nil {
			t.Fatal(err)
		}
		if n, err := unix.Read(r.streamPeer, sink); err == nil {
			got += n
		}
		if n, _ := r.d.Buffered(r.stream); n == 0 && got == total {
			return held
		}
	}
	t.Fatalf("the peer got %d of %d bytes", got, total)
	return held
}

// The receive passes allocate nothing: with data, idle (which for EpollBusy
// and Park means arming and sleeping), and per-queue's periodic refresh.
func TestPassAllocatesNothing(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			r := newAllocRig(t, cfg)
			const runs = 50
			start := r.h.data.Load()
			if a := testing.AllocsPerRun(runs, func() { r.feedAndReceive(t) }); a != 0 {
				t.Errorf("%v allocations per receiving pass", a)
			}
			if got := r.h.data.Load() - start; got != 2*(runs+1) {
				t.Fatalf("%d messages delivered, want %d: the passes did not receive", got, 2*(runs+1))
			}
			if a := testing.AllocsPerRun(runs, func() { r.d.Poll() }); a != 0 {
				t.Errorf("%v allocations per idle pass", a)
			}
			if cfg.PerQueue {
				if a := testing.AllocsPerRun(1, func() {
					for range refreshEvery {
						r.d.Poll()
					}
				}); a != 0 {
					t.Errorf("%v allocations over %d passes with a refresh", a, refreshEvery)
				}
			}
			// Answering, as a handler does, allocates nothing either: SendTo
			// on the UDP socket and Send on the stream.
			sa, err := unix.Getsockname(r.udpPeer)
			if err != nil {
				t.Fatal(err)
			}
			in := sa.(*unix.SockaddrInet4)
			peer := netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
			if a := testing.AllocsPerRun(runs, func() {
				if _, err := r.d.SendTo(r.udp, r.payload, peer); err != nil {
					t.Fatal(err)
				}
				if _, err := r.d.Send(r.stream, r.payload); err != nil {
					t.Fatal(err)
				}
			}); a != 0 {
				t.Errorf("%v allocations per SendTo+Send", a)
			}
			buf := make([]byte, 128)
			if n, err := unix.Read(r.udpPeer, buf); err != nil || n != len(r.payload) {
				t.Errorf("the peer got %d bytes, %v", n, err)
			}
			// Holding back on a full stream and flushing it as it drains:
			// nothing once the held-back buffer has grown (a bigger round
			// first).
			// (The small answers above may have been held back too: read
			// the stream empty first.)
			sink := make([]byte, 64<<10)
			for range 10000 {
				r.d.Poll()
				_, err := unix.Read(r.streamPeer, sink)
				if n, _ := r.d.Buffered(r.stream); n == 0 && err != nil {
					break
				}
			}
			chunk := make([]byte, 16<<10)
			r.sendHeldBack(t, 512<<10, chunk, sink)
			held := 0
			if a := testing.AllocsPerRun(20, func() {
				if r.sendHeldBack(t, 256<<10, chunk, sink) {
					held++
				}
			}); a != 0 {
				t.Errorf("%v allocations per held-back Send round", a)
			}
			if held == 0 {
				t.Errorf("Send never held data back: the test did not test it")
			}
		})
	}
}

// BenchmarkReceivePass is one datagram, one stream chunk and one completion
// through each backend, on loopback.
func BenchmarkReceivePass(b *testing.B) {
	for _, cfg := range testConfigs {
		b.Run(cfg.name(), func(b *testing.B) {
			r := newAllocRig(b, cfg)
			b.ReportAllocs()
			for b.Loop() {
				r.feedAndReceive(b)
			}
		})
	}
}
