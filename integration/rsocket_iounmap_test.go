//go:build integration

package integration

import (
	"bytes"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
	"github.com/pureverbs/pureverbs/uverbs"
)

// IOUnmap (riounmap) frees the peer's iomap entry for the next IOMap and
// deregisters the buffer, sending nothing, as rsocket does: with a peer
// table of one entry a second IOMap is refused until the first is
// unmapped, the next one lands the peer's IOWrites in the new buffer, and
// an IOWrite into a mapping unmapped behind the writer's back fails the
// writer's connection (remote access error) instead of landing.
func TestRsocketIOUnmap(t *testing.T) {
	cli, srv := rsocketPair(t, 7797, rsocket.Options{IOMapSize: 1})
	bufs := make([]*uverbs.Buffer, 2)
	for i := range bufs {
		b, err := uverbs.NewBuffer(4096, uverbs.BufferOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bufs[i] = b
	}
	// mapAndTell maps b at offset 0 and sends a byte behind the mapping,
	// so that the server has its descriptor once it has read the byte.
	mapAndTell := func(b *uverbs.Buffer) {
		t.Helper()
		if _, err := cli.IOMap(b, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(srv, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// written waits for the server's IOWrite of p to show in b.
	written := func(b *uverbs.Buffer, p []byte) {
		t.Helper()
		if _, err := srv.IOWrite(p, 0); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); !bytes.Equal(b.Bytes()[:len(p)], p); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("IOWrite %q never landed: %q", p, b.Bytes()[:len(p)])
			}
		}
	}

	mapAndTell(bufs[0])
	written(bufs[0], []byte("first"))
	if _, err := cli.IOMap(bufs[1], 0); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("a second IOMap into a one-entry table: %v, want ENOMEM", err)
	}
	if err := cli.IOUnmap(bufs[0]); err != nil {
		t.Fatal(err)
	}
	if err := cli.IOUnmap(bufs[0]); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("IOUnmap again: %v, want EINVAL", err)
	}
	mapAndTell(bufs[1])
	written(bufs[1], []byte("second"))
	if got := string(bufs[0].Bytes()[:6]); got != "first\x00" {
		t.Errorf("the unmapped buffer changed: %q", got)
	}

	// Unmapped without telling the server, which writes into it.
	if err := cli.IOUnmap(bufs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.IOWrite([]byte("stale"), 0); err != nil {
		t.Fatalf("IOWrite (posted): %v", err)
	}
	srv.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := srv.Read(make([]byte, 1))
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("the writer's Read after writing into an unmapped buffer: %v, want EIO", err)
	}
	if got := string(bufs[1].Bytes()[:6]); got != "second" {
		t.Errorf("the write reached the unmapped buffer: %q", got)
	}
}
