//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Every backend receives datagrams on a socket added as a net.PacketConn and
// on one added as a raw descriptor, with the right sender, and SendTo
// answers them.
func TestLoopbackUDP(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			var d *Driver
			rec := &recorder{}
			rec.echo = func(id ConnID, p []byte, from netip.AddrPort) {
				if _, err := d.SendTo(id, p, from); err != nil {
					t.Errorf("SendTo: %v", err)
				}
			}
			d = newDriver(t, cfg, rec)
			conn := udpListen(t)
			idConn := addConn(t, d, conn)
			fd, fdAddr := rawUDP(t)
			idFD, err := d.AddFD(fd)
			if err != nil {
				unix.Close(fd)
				t.Fatalf("AddFD: %v", err)
			}
			if idConn == idFD {
				t.Fatalf("two sources share id %d", idConn)
			}
			run(t, d)
			c1 := udpDial(t, conn.LocalAddr())
			c2 := udpDial(t, net.UDPAddrFromAddrPort(fdAddr))
			const n = 50
			for k := range n {
				fmt.Fprintf(c1, "a%d", k)
				fmt.Fprintf(c2, "b%d", k)
				// Read the echoes as we go, so no socket buffer overflows.
				for _, c := range []*net.UDPConn{c1, c2} {
					c.SetReadDeadline(time.Now().Add(5 * time.Second))
					buf := make([]byte, 64)
					if _, err := c.Read(buf); err != nil {
						t.Fatalf("echo %d: %v", k, err)
					}
				}
			}
			eventually(t, "all datagrams", 5*time.Second, func() bool { return len(rec.messages()) == 2*n })
			next := map[ConnID]int{}
			want := map[ConnID]struct {
				prefix string
				from   netip.AddrPort
			}{
				idConn: {"a", c1.LocalAddr().(*net.UDPAddr).AddrPort()},
				idFD:   {"b", c2.LocalAddr().(*net.UDPAddr).AddrPort()},
			}
			for _, m := range rec.messages() {
				w, ok := want[m.id]
				if !ok {
					t.Fatalf("datagram on unknown id %d", m.id)
				}
				if exp := fmt.Sprintf("%s%d", w.prefix, next[m.id]); m.data != exp {
					t.Errorf("id %d: got %q, want %q", m.id, m.data, exp)
				}
				if m.from != w.from {
					t.Errorf("id %d: from %v, want %v", m.id, m.from, w.from)
				}
				next[m.id]++
			}
			if s := d.Stats(); s.Reads < 2*n || s.Passes == 0 {
				t.Errorf("stats %+v: fewer reads than datagrams", s)
			}
		})
	}
}

// Every backend receives a TCP stream intact and reports the peer's close.
func TestLoopbackTCP(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			rec := &recorder{}
			d := newDriver(t, cfg, rec)
			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			client, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			id := addConn(t, d, server.(*net.TCPConn))
			run(t, d)
			want := make([]byte, 256<<10)
			for i := range want {
				want[i] = byte(i * 7)
			}
			if _, err := client.Write(want); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the whole stream", 10*time.Second, func() bool { return len(rec.streamBytes(id)) >= len(want) })
			if got := rec.streamBytes(id); string(got) != string(want) {
				t.Fatalf("stream differs: got %d bytes", len(got))
			}
			client.Close()
			eventually(t, "peer close", 5*time.Second, func() bool { return len(rec.closed()) == 1 })
			if c := rec.closed()[0]; c.id != id || c.reason != PeerClosed || c.err != nil {
				t.Fatalf("close %+v, want id %d PeerClosed nil", c, id)
			}
			for _, m := range rec.messages() {
				if m.from.IsValid() {
					t.Fatalf("stream data with a sender %v", m.from)
				}
			}
		})
	}
}

// A failing source closes alone: a connected UDP socket whose peer port is
// closed reads ECONNREFUSED and a reset TCP connection ECONNRESET, while the
// healthy socket next to them keeps receiving.
func TestErrorClosesOnlyThatSource(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			rec := &recorder{}
			d := newDriver(t, cfg, rec)

			healthy := udpListen(t)
			idHealthy := addConn(t, d, healthy)

			dead := udpListen(t)
			deadAddr := dead.LocalAddr()
			dead.Close()
			refused := udpDial(t, deadAddr)
			idRefused := addConn(t, d, refused)

			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			tc, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			sc, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			idReset := addConn(t, d, sc.(*net.TCPConn))
			run(t, d)

			if _, err := refused.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			tc.(*net.TCPConn).SetLinger(0)
			tc.Close() // an RST
			want := map[ConnID]unix.Errno{idRefused: unix.ECONNREFUSED, idReset: unix.ECONNRESET}
			eventually(t, "both failures", 5*time.Second, func() bool { return len(rec.closed()) == 2 })
			for _, c := range rec.closed() {
				errno, ok := want[c.id]
				if !ok || c.reason != Failed || !errors.Is(c.err, errno) {
					t.Errorf("close %+v; want Failed with %v", c, errno)
				}
			}
			client := udpDial(t, healthy.LocalAddr())
			client.Write([]byte("still here"))
			eventually(t, "the healthy socket's datagram", 5*time.Second, func() bool {
				for _, m := range rec.messages() {
					if m.id == idHealthy && m.data == "still here" {
						return true
					}
				}
				return false
			})
		})
	}
}

// A removed source's slot goes to the next source (under a new id), and
// events for the old occupant do not reach the new one.
func TestSlotReuse(t *testing.T) {
	rec := &recorder{}
	d := newDriver(t, Config{Backend: EpollSpin}, rec)
	a, b := udpListen(t), udpListen(t)
	idA := addConn(t, d, a)
	idB := addConn(t, d, b)
	if err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(idB); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(idB); !errors.Is(err, ErrNoSource) {
		t.Fatalf("second Remove: %v, want ErrNoSource", err)
	}
	for _, bad := range []ConnID{0, newConnID(99, 1), newConnID(idB.slot(), idB.gen()+1)} {
		if err := d.Remove(bad); !errors.Is(err, ErrNoSource) {
			t.Fatalf("Remove(%v): %v, want ErrNoSource", bad, err)
		}
	}
	if err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	if c := rec.closed(); len(c) != 1 || c[0] != (closeEvent{idB, Removed, nil}) {
		t.Fatalf("closes %+v, want one Removed for %d", c, idB)
	}
	// b's socket is still open (the driver closed only its duplicate): data
	// sent to it must not show up under the id's next occupant.
	udpDial(t, b.LocalAddr()).Write([]byte("to the old occupant"))
	c := udpListen(t)
	idC := addConn(t, d, c)
	if idC.slot() != idB.slot() || idC == idB {
		t.Fatalf("new source got id %v, want the freed slot of %v under a new generation", idC, idB)
	}
	udpDial(t, c.LocalAddr()).Write([]byte("to the new one"))
	for range 100 {
		if err := d.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	msgs := rec.messages()
	if len(msgs) != 1 || msgs[0].id != idC || msgs[0].data != "to the new one" {
		t.Fatalf("messages %+v; want only the new occupant's", msgs)
	}
	_ = idA
}

// Adding and removing from other goroutines while the loop runs (run with
// -race), including from a handler.
func TestAddRemoveWhileRunning(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			var d *Driver
			rec := &recorder{}
			var once sync.Once
			var fromHandler ConnID
			rec.echo = func(id ConnID, p []byte, from netip.AddrPort) {
				if string(p) == "remove me" {
					once.Do(func() {
						fromHandler = id
						if err := d.Remove(id); err != nil {
							t.Errorf("Remove from handler: %v", err)
						}
					})
				}
			}
			d = newDriver(t, cfg, rec)
			run(t, d)
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range 10 {
						c := udpListen(t)
						id, err := d.AddConn(c)
						if err != nil {
							t.Errorf("AddConn: %v", err)
							return
						}
						msg := fmt.Sprintf("g%d-%d", g, k)
						if g == 0 && k == 5 {
							msg = "remove me"
						}
						udpDial(t, c.LocalAddr()).Write([]byte(msg))
						deadline := time.Now().Add(5 * time.Second)
						for !rec.has(id, msg) && time.Now().Before(deadline) {
							time.Sleep(100 * time.Microsecond)
						}
						if msg != "remove me" {
							if err := d.Remove(id); err != nil {
								t.Errorf("Remove(%d): %v", id, err)
							}
						}
					}
				}()
			}
			wg.Wait()
			eventually(t, "40 closes", 5*time.Second, func() bool { return len(rec.closed()) == 40 })
			for _, c := range rec.closed() {
				if c.reason != Removed {
					t.Errorf("close %+v, want Removed", c)
				}
			}
			if fromHandler == 0 {
				t.Errorf("the handler never saw its datagram")
			}
		})
	}
}

// has reports whether id received msg.
func (r *recorder) has(id ConnID, msg string) bool {
	for _, m := range r.messages() {
		if m.id == id && m.data == msg {
			return true
		}
	}
	return false
}

// Close releases every descriptor the driver made or owns, reports every
// source, is idempotent, and refuses use afterwards.
func TestCloseReleasesEverything(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			before := openFDs(t)
			rec := &recorder{}
			d, err := New(cfg, rec)
			if errors.Is(err, ErrNeedCapNetAdmin) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			fd, _ := rawUDP(t)
			if _, err := d.AddFD(fd); err != nil {
				unix.Close(fd)
				if errors.Is(err, ErrNeedCapNetAdmin) {
					t.Skip(err)
				}
				t.Fatal(err)
			}
			c := udpListen(t)
			if _, err := d.AddConn(c); err != nil {
				t.Fatal(err)
			}
			stop := run(t, d)
			time.Sleep(5 * time.Millisecond)
			if err := d.Run(t.Context()); !errors.Is(err, ErrRunning) {
				t.Errorf("second Run: %v, want ErrRunning", err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			stop()
			if err := d.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if n := len(rec.closed()); n != 2 {
				t.Errorf("%d OnClosed calls, want 2", n)
			}
			c.Close()
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after Close, %d before", after, before)
			}
			if _, err := d.AddFD(0); !errors.Is(err, ErrClosed) && !errors.Is(err, unix.ENOTSOCK) {
				t.Errorf("AddFD after Close: %v", err)
			}
			if _, err := d.AddConn(udpListen(t)); !errors.Is(err, ErrClosed) {
				t.Errorf("AddConn after Close: %v, want ErrClosed", err)
			}
			if err := d.Poll(); !errors.Is(err, ErrClosed) {
				t.Errorf("Poll after Close: %v, want ErrClosed", err)
			}
			if err := d.Run(t.Context()); !errors.Is(err, ErrClosed) {
				t.Errorf("Run after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// A descriptor that is not a datagram or stream socket is refused and stays
// the caller's.
func TestAddRejects(t *testing.T) {
	d := newDriver(t, Config{Backend: EpollSpin}, &recorder{})
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := d.AddFD(int(f.Fd())); !errors.Is(err, unix.ENOTSOCK) {
		t.Errorf("AddFD(file): %v, want ENOTSOCK", err)
	}
	raw, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(raw)
	if _, err := d.AddFD(raw); err == nil {
		t.Errorf("AddFD(seqpacket) accepted")
	}
	if _, err := unix.FcntlInt(uintptr(raw), unix.F_GETFD, 0); err != nil {
		t.Errorf("a refused descriptor was closed: %v", err)
	}
	if _, err := d.AddCQ(nil); err == nil {
		t.Errorf("AddCQ(nil) accepted")
	}
	if _, err := New(Config{Backend: EpollSpin}, nil); err == nil {
		t.Errorf("New with nil handler accepted")
	}
}

func TestConfig(t *testing.T) {
	bad := []Config{
		{},
		{Backend: 42},
		{Backend: EpollSpin, PerQueue: true},
		{Backend: Park, PerQueue: true},
		{Backend: EpollBusy, Wait: -1},
		{Backend: RecvBusy, BusyPoll: -time.Microsecond},
		{Backend: Park, ParkAfter: -1},
		{Backend: EpollSpin, BufferSize: -1},
		{Backend: EpollBusy, BusyPoll: 1 << 31 * time.Microsecond},
	}
	for _, c := range bad {
		if _, err := New(c, &recorder{}); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	got, err := Config{Backend: EpollBusy}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.Wait != DefaultWait || got.BusyPoll != DefaultBusyPoll || got.BufferSize != DefaultBufferSize || got.ParkAfter != DefaultParkAfter {
		t.Errorf("defaults: %+v", got)
	}
	if got, _ := (Config{Backend: Park}).withDefaults(); got.Wait != 0 {
		t.Errorf("Park's zero Wait became %v; it means no limit", got.Wait)
	}
	for _, b := range Backends {
		if p, err := ParseBackend(b.String()); err != nil || p != b {
			t.Errorf("ParseBackend(%q) = %v, %v", b.String(), p, err)
		}
	}
	if _, err := ParseBackend("nope"); err == nil {
		t.Errorf("ParseBackend(nope) accepted")
	}
}

// A stream read that fills the buffer exactly still delivers everything:
// BufferSize bounds one read, not the stream.
func TestSmallBuffer(t *testing.T) {
	rec := &recorder{}
	d := newDriver(t, Config{Backend: EpollSpin, BufferSize: 16}, rec)
	var fds [2]int
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	peer := os.NewFile(uintptr(fds[1]), "peer")
	defer peer.Close()
	id, err := d.AddFD(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(peer, "0123456789abcdefghijklmnopqrstuvwxyz")
	for range 10 {
		d.Poll()
	}
	if got := string(rec.streamBytes(id)); got != "0123456789abcdefghijklmnopqrstuvwxyz" {
		t.Fatalf("got %q", got)
	}
}
