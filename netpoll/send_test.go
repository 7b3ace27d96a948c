//go:build linux

package netpoll

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair is a loopback TCP connection: the server end, already in d with
// small kernel buffers so they fill at once, and the client end, which the
// test reads when it chooses to.
func tcpPair(t *testing.T, d *Driver) (ConnID, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.DialTCP("tcp4", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	setBuf(t, server, unix.SO_SNDBUF, 32<<10)
	setBuf(t, client, unix.SO_RCVBUF, 32<<10)
	id := addConn(t, d, server)
	if err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	return id, client
}

func setBuf(t *testing.T, c syscall.Conn, opt, size int) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, size) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
}

// pattern is n bytes that show a lost, repeated or reordered chunk.
func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>10)
	}
	return p
}

// Send on a stream whose kernel buffer is full holds the rest back and
// writes it, in order, as the socket becomes writable: every Send returns
// its whole length, and the peer, reading only after all of it was sent,
// receives every byte once, in order.
func TestSendHoldsBackOnFullSocketBuffer(t *testing.T) {
	for _, cfg := range testConfigs {
		t.Run(cfg.name(), func(t *testing.T) {
			d := newDriver(t, cfg, &recorder{})
			id, client := tcpPair(t, d)
			want := pattern(1 << 20)
			for off := 0; off < len(want); off += 16 << 10 {
				chunk := want[off : off+16<<10]
				if n, err := d.Send(id, chunk); n != len(chunk) || err != nil {
					t.Fatalf("Send at %d: %d, %v; want %d, nil", off, n, err, len(chunk))
				}
			}
			held, err := d.Buffered(id)
			if err != nil {
				t.Fatal(err)
			}
			if held < len(want)/2 {
				t.Fatalf("only %d of %d bytes held back: the socket buffer never filled", held, len(want))
			}
			got := make([]byte, len(want))
			read := make(chan error, 1)
			go func() {
				client.SetReadDeadline(time.Now().Add(30 * time.Second))
				_, err := io.ReadFull(client, got)
				read <- err
			}()
			deadline := time.Now().Add(30 * time.Second)
			for {
				if err := d.Poll(); err != nil {
					t.Fatal(err)
				}
				if n, _ := d.Buffered(id); n == 0 {
					break
				}
				if time.Now().After(deadline) {
					n, _ := d.Buffered(id)
					t.Fatalf("%d bytes still held back after 30s", n)
				}
			}
			if err := <-read; err != nil {
				t.Fatalf("reading: %v", err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				t.Fatalf("the peer got different bytes from offset %d", i)
			}
			// Emptied, the socket left EPOLLOUT: idle passes find nothing.
			if s := &d.slots[id.slot()]; s.writable || d.writers != 0 {
				t.Errorf("still watching writability (writable %v, writers %d)", s.writable, d.writers)
			}
		})
	}
}

// More than Config.SendBuffer held back is refused with ErrSendBufferFull;
// what Send did take still arrives, and nothing else.
func TestSendBufferLimit(t *testing.T) {
	const limit = 64 << 10
	d := newDriver(t, Config{Backend: EpollSpin, SendBuffer: limit}, &recorder{})
	id, client := tcpPair(t, d)
	want := pattern(1 << 20)
	taken := 0
	for taken < len(want) {
		n, err := d.Send(id, want[taken:taken+4096])
		taken += n
		if errors.Is(err, ErrSendBufferFull) {
			break
		}
		if err != nil || n != 4096 {
			t.Fatalf("Send: %d, %v", n, err)
		}
	}
	if taken == len(want) {
		t.Fatalf("all %d bytes taken with a %d-byte limit", taken, limit)
	}
	if held, _ := d.Buffered(id); held > limit {
		t.Fatalf("%d bytes held back, above the %d limit", held, limit)
	}
	got := make([]byte, 0, taken)
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < taken && time.Now().Before(deadline) {
		if err := d.Poll(); err != nil {
			t.Fatal(err)
		}
		client.SetReadDeadline(time.Now().Add(time.Millisecond))
		n, _ := client.Read(buf)
		got = append(got, buf[:n]...)
	}
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _ := client.Read(buf); n > 0 {
		t.Fatalf("%d bytes beyond the %d taken", n, taken)
	}
	if !bytes.Equal(got, want[:taken]) {
		t.Fatalf("the peer got %d bytes, not the %d taken", len(got), taken)
	}
}

// A stream closed by its peer while data is held back closes once, as a
// failed write or end-of-file, and its id is gone.
func TestSendHeldBackPeerGone(t *testing.T) {
	rec := &recorder{}
	d := newDriver(t, Config{Backend: EpollSpin}, rec)
	id, client := tcpPair(t, d)
	for range 64 {
		if _, err := d.Send(id, make([]byte, 16<<10)); err != nil {
			t.Fatal(err)
		}
	}
	client.Close()
	eventually(t, "the source closed", 10*time.Second, func() bool {
		d.Poll()
		return len(rec.closed()) == 1
	})
	if c := rec.closed()[0]; c.id != id || (c.reason != Failed && c.reason != PeerClosed) {
		t.Errorf("close %+v", c)
	}
	if _, err := d.Buffered(id); !errors.Is(err, ErrNoSource) {
		t.Errorf("Buffered after close: %v, want ErrNoSource", err)
	}
	if d.writers != 0 {
		t.Errorf("writers %d after the close", d.writers)
	}
}
