//go:build integration

package integration

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
	"github.com/vishvananda/netlink"
)

// A peer that vanishes without a word (every frame on both veths dropped
// by netem, once nothing is in flight: no DISCONNECT message, no DREQ
// arrives, no send of the reader's is outstanding): a Read blocked on a
// connection with Options.Keepalive ends with EIO within the keepalive
// period plus the RC retry budget, as rsocket's keepalive (an empty RDMA
// WRITE that the dead peer never acknowledges) makes it. The control pair
// without keepalive, blocked the same way, is still blocked seconds later:
// only the keepalive notices.
func TestRsocketKeepaliveDeadPeer(t *testing.T) {
	const period = time.Second
	cli, srv := rsocketPair(t, 7795, rsocket.Options{Keepalive: period})
	quiet, quietSrv := rsocketPair(t, 7796, rsocket.Options{})
	// A byte each way first: each side's first pass over its completion
	// queue hands out the second ring half (an SGL message); sent into the
	// blackout it would fail the connection without any keepalive.
	for _, p := range [][2]*rsocket.Conn{{cli, srv}, {srv, cli}, {quiet, quietSrv}, {quietSrv, quiet}} {
		if _, err := p[0].Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(p[1], make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the last acknowledgements
	setNetem(t, netlink.NetemQdiscAttrs{Loss: 100})
	start := time.Now()
	read := func(c *rsocket.Conn) <-chan error {
		done := make(chan error, 1)
		go func() {
			var b [1]byte
			_, err := c.Read(b[:])
			done <- err
		}()
		return done
	}
	alive, silent := read(cli), read(quiet)
	const bound = period + 30*time.Second
	select {
	case err := <-alive:
		took := time.Since(start)
		t.Logf("keepalive every %v: Read returned %v after %v", period, err, took)
		var op *net.OpError
		if !errors.As(err, &op) || !errors.Is(err, syscall.EIO) {
			t.Errorf("Read: %v; want a *net.OpError with EIO (the keepalive's failed completion)", err)
		}
	case err := <-silent:
		t.Fatalf("the connection without keepalive returned first: %v", err)
	case <-time.After(bound):
		t.Fatalf("no error %v after the peer vanished, with keepalive every %v", bound, period)
	}
	select {
	case err := <-silent:
		t.Fatalf("without keepalive Read returned %v; want it blocked: nothing tells it the peer is gone", err)
	case <-time.After(2 * time.Second):
	}
	quiet.Close()
	if err := <-silent; !errors.Is(err, net.ErrClosed) {
		t.Errorf("the blocked Read after Close: %v, want net.ErrClosed", err)
	}
}
