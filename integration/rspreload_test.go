//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
	"golang.org/x/sys/unix"
)

// rspreload is librdmacm's socket preload in the image (vm.addPeers).
func rspreload() string {
	triple := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	return "/usr/lib/" + triple + "/rsocket/librspreload.so.1"
}

// startPreloaded starts sock-echo (a plain BSD-sockets program) under
// LD_PRELOAD=librspreload, killed after limit.
func startPreloaded(t *testing.T, limit time.Duration, args ...string) *peer {
	t.Helper()
	preload := func(c *exec.Cmd) { c.Env = append(c.Environ(), "LD_PRELOAD="+rspreload()) }
	return startPeerWith(t, limit, preload, "/usr/local/bin/sock-echo", args...)
}

// echoPattern is sock-echo's byte i: i*7+3.
func echoPattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((off+i)*7 + 3)
	}
	return b
}

// An unmodified socket program under librspreload against qp/rsocket,
// both ways: the program as client echoes
// 4 MiB through a Go rsocket server in 64 KiB chunks (and 1000-byte ones,
// which do not align with rsocket's ring), shuts down its sending side and
// sees the Go end close; as server it echoes what a Go client writes,
// which then shuts down its side (CloseWrite) and reads io.EOF.
func TestRspreloadInterop(t *testing.T) {
	devices(t, 2)
	const total = 4 << 20
	for i, chunk := range []int{65536, 1000} {
		t.Run(fmt.Sprintf("GoServerPreloadClient/chunk=%d", chunk), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			port := 7850 + i
			l, err := rsocket.Listen(ctx, fmt.Sprintf("10.99.0.1:%d", port), rsocket.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			cli := startPreloaded(t, 120*time.Second, "client", "10.99.0.1", fmt.Sprint(port), "10.99.0.2", fmt.Sprint(total), fmt.Sprint(chunk))
			c, err := l.AcceptConn(ctx)
			if err != nil {
				t.Fatalf("accept: %v\n%s", err, cli.out.String())
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(100 * time.Second))
			n, err := io.Copy(c, c) // echo until the client's shutdown
			if err != nil || n != total {
				t.Fatalf("echoed %d bytes: %v\n%s", n, err, cli.out.String())
			}
			if err := c.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			out := cli.wait(t)
			if !strings.Contains(out, fmt.Sprintf("client: %d bytes verified", total)) {
				t.Errorf("sock-echo client:\n%s", out)
			}
		})
		t.Run(fmt.Sprintf("PreloadServerGoClient/chunk=%d", chunk), func(t *testing.T) {
			port := 7860 + i
			srv := startPreloaded(t, 120*time.Second, "server", "10.99.0.1", fmt.Sprint(port))
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			var c *rsocket.Conn
			for {
				var err error
				c, err = rsocket.Dial(ctx, fmt.Sprintf("10.99.0.1:%d", port), rsocket.Options{Source: netip.MustParseAddr("10.99.0.2")})
				if err == nil {
					break
				}
				if !errors.Is(err, unix.ECONNREFUSED) || ctx.Err() != nil {
					t.Fatalf("dial: %v\n%s", err, srv.out.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(100 * time.Second))
			in := make([]byte, chunk)
			for off := 0; off < total; off += chunk {
				n := min(chunk, total-off)
				want := echoPattern(off, n)
				if _, err := c.Write(want); err != nil {
					t.Fatalf("write at %d: %v\n%s", off, err, srv.out.String())
				}
				if _, err := io.ReadFull(c, in[:n]); err != nil {
					t.Fatalf("read at %d: %v\n%s", off, err, srv.out.String())
				}
				if !bytes.Equal(in[:n], want) {
					t.Fatalf("echo differs in the chunk at %d", off)
				}
			}
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(in); n != 0 || err != io.EOF {
				t.Fatalf("after the echo: %d bytes, %v; want io.EOF", n, err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			out := srv.wait(t)
			if !strings.Contains(out, fmt.Sprintf("server: %d bytes echoed", total)) {
				t.Errorf("sock-echo server:\n%s", out)
			}
		})
	}
}
