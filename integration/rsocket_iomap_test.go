//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
	"github.com/pureverbs/pureverbs/uverbs"
)

// riostreamPeer plays riostream's part with c: map a buffer of size bytes
// for the peer's writes, the 16-byte sync by messages, then per iteration
// count IOWrites of size bytes one way (the last one carrying the marker
// in its last byte and, before it, riostream's byte pattern) and count
// back; the receiver spins on its buffer's last byte and checks the
// pattern.
func riostreamPeer(c *rsocket.Conn, b *uverbs.Buffer, client bool, size, count, iters int) error {
	mem := b.Bytes()[:size]
	mem[size-1] = 0xff
	if _, err := c.IOMap(b, 0); err != nil {
		return err
	}
	sync := make([]byte, 16)
	if client {
		if _, err := c.Write(sync); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, sync); err != nil {
			return err
		}
	} else {
		if _, err := io.ReadFull(c, sync); err != nil {
			return err
		}
		if _, err := c.Write(sync); err != nil {
			return err
		}
	}
	var marker, fmtSeq, verSeq byte
	// What goes out before the pattern ends, like riostream's own
	// buffer, in 0xff: no marker value yet.
	out := make([]byte, size)
	out[size-1] = 0xff
	send := func() error {
		for range count - 1 {
			if _, err := c.IOWrite(out, 0); err != nil {
				return err
			}
		}
		out[size-1] = marker
		marker++
		for i := range out[:size-1] {
			out[i] = fmtSeq
			fmtSeq++
		}
		_, err := c.IOWrite(out, 0)
		return err
	}
	recv := func() error {
		want := marker
		marker++
		for deadline := time.Now().Add(60 * time.Second); b.LoadByte(size-1) != want; runtime.Gosched() {
			if time.Now().After(deadline) {
				return fmt.Errorf("marker %d never arrived (last byte %d)", want, b.LoadByte(size-1))
			}
		}
		for i, v := range mem[:size-1] {
			if v != verSeq {
				return fmt.Errorf("byte %d is %d, want %d", i, v, verSeq)
			}
			verSeq++
		}
		return nil
	}
	for range iters {
		first, second := recv, send
		if client {
			first, second = send, recv
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	return nil
}

// Go against rdma-core's riostream, both roles, with -T v on both ends:
// riomap/riowrite interoperate.
func TestRsocketRiostreamInterop(t *testing.T) {
	devices(t, 2)
	for i, tc := range []struct {
		size, count, iters int
		goServer           bool
	}{
		{size: 64, count: 50, iters: 3, goServer: true},
		{size: 64, count: 50, iters: 3},
		{size: 4096, count: 20, iters: 3, goServer: true},
		{size: 4096, count: 20, iters: 3},
		{size: 65536, count: 10, iters: 2, goServer: true},
		{size: 65536, count: 10, iters: 2},
		{size: 1 << 20, count: 2, iters: 1, goServer: true},
		{size: 1 << 20, count: 2, iters: 1},
	} {
		role := "GoClient"
		if tc.goServer {
			role = "GoServer"
		}
		t.Run(fmt.Sprintf("%s/%d", role, tc.size), func(t *testing.T) {
			port := 7750 + i
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			b, err := uverbs.NewBuffer(tc.size, uverbs.BufferOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			o := rsocket.Options{IOMapSize: 1}
			args := []string{"-p", strconv.Itoa(port), "-S", strconv.Itoa(tc.size), "-C", strconv.Itoa(tc.count), "-I", strconv.Itoa(tc.iters), "-T", "v"}
			var c *rsocket.Conn
			var p *peer
			if tc.goServer {
				l, err := rsocket.Listen(ctx, "10.99.0.1:"+strconv.Itoa(port), o)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				p = startPeer(t, 120*time.Second, "/usr/bin/riostream", append(args, "-s", "10.99.0.1", "-b", "10.99.0.2")...)
				if c, err = l.AcceptConn(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				p = startPeer(t, 120*time.Second, "/usr/bin/riostream", append(args, "-b", "10.99.0.1")...)
				// Not between its rlisten and its RDMA_IOMAPSIZE (see
				// streamPair.try): the connection would get no iomap table.
				time.Sleep(streamCListenSettle)
				o.Source = cmAddr1
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					if c, err = rsocket.Dial(ctx, "10.99.0.1:"+strconv.Itoa(port), o); err == nil || time.Now().After(deadline) {
						break
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			c.SetDeadline(time.Now().Add(100 * time.Second))
			err = riostreamPeer(c, b, !tc.goServer, tc.size, tc.count, tc.iters)
			if err != nil {
				t.Errorf("Go %s: %v", role, err)
			}
			c.Close()
			out := p.wait(t)
			t.Logf("riostream:\n%s", out)
		})
	}
}
