//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
)

// rsocketPair listens on rxe0's address and dials from rxe1's, in one
// process, and returns the two ends.
func rsocketPair(t testing.TB, port int, o rsocket.Options) (client, server *rsocket.Conn) {
	t.Helper()
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := "10.99.0.1:" + strconv.Itoa(port)
	l, err := rsocket.Listen(ctx, addr, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *rsocket.Conn, 1)
	var acceptErr error
	go func() {
		c, err := l.AcceptConn(ctx)
		acceptErr = err
		accepted <- c
	}()
	o.Source = cmAddr1
	client, err = rsocket.Dial(ctx, addr, o)
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		client.Close()
		t.Fatal(acceptErr)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// Go against Go: data both ways at once, byte-exact, then CloseWrite gives
// the reader io.EOF after the data, and the addresses are the CM's.
func TestRsocketGoGo(t *testing.T) {
	cli, srv := rsocketPair(t, 7700, rsocket.Options{})
	if got := cli.RemoteAddr().String(); got != "10.99.0.1:7700" {
		t.Errorf("client RemoteAddr %s", got)
	}
	if a, ok := srv.RemoteAddr().(*net.TCPAddr); !ok || a.IP.String() != "10.99.0.2" {
		t.Errorf("server RemoteAddr %v", srv.RemoteAddr())
	}
	const size = 3<<20 + 12345
	want := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(want)
	var wg sync.WaitGroup
	for _, dir := range []struct {
		name string
		w, r *rsocket.Conn
	}{{"client to server", cli, srv}, {"server to client", srv, cli}} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for off := 0; off < size; {
				n := min(size-off, 1+rand.Intn(200000))
				if _, err := dir.w.Write(want[off : off+n]); err != nil {
					t.Errorf("%s: write: %v", dir.name, err)
					return
				}
				off += n
			}
			if err := dir.w.CloseWrite(); err != nil {
				t.Errorf("%s: CloseWrite: %v", dir.name, err)
			}
		}()
		go func() {
			defer wg.Done()
			got, err := io.ReadAll(dir.r)
			if err != nil {
				t.Errorf("%s: read: %v", dir.name, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: %d bytes arrived, %d sent, equal %v", dir.name, len(got), len(want), bytes.Equal(got, want))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		// A hang fails here, not at the package's timeout: closing the
		// connections wakes the calls, which then report their errors.
		cli.Close()
		srv.Close()
		<-done
		t.Fatal("the transfers did not end within 2 minutes")
	}
}

// A blocked Read wakes at its deadline with os.ErrDeadlineExceeded, and
// Close wakes a blocked Read with net.ErrClosed; parked in the runtime's
// poller and on its thread (ThreadWait).
func TestRsocketDeadlineClose(t *testing.T) {
	t.Run("netpoll", func(t *testing.T) { testRsocketDeadlineClose(t, 7701, rsocket.Options{}) })
	t.Run("thread", func(t *testing.T) { testRsocketDeadlineClose(t, 7736, rsocket.Options{ThreadWait: true}) })
}

func testRsocketDeadlineClose(t *testing.T, port int, o rsocket.Options) {
	cli, srv := rsocketPair(t, port, o)
	cli.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	start := time.Now()
	_, err := cli.Read(make([]byte, 10))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Errorf("error %T is not a *net.OpError", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("deadline of 200 ms woke after %v", d)
	}
	cli.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := cli.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cli.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("read after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake Read")
	}
	// The peer's Read sees the end of the stream.
	srv.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := srv.Read(make([]byte, 10)); err != io.EOF {
		t.Errorf("peer read after Close: %d, %v", n, err)
	}
}

// rstreamArgs are rdma-core rstream's options for one custom run.
func rstreamArgs(port, size, count, iters int, extra ...string) []string {
	return append([]string{"-p", strconv.Itoa(port), "-S", strconv.Itoa(size), "-C", strconv.Itoa(count), "-I", strconv.Itoa(iters), "-T", "v"}, extra...)
}

// rstreamPeer plays rstream's part with c: the 16-byte sync, then per
// iteration count transfers of size bytes one way and count back, with
// rstream's verification pattern (one byte counter per direction).
func rstreamPeer(c net.Conn, client bool, size, count, iters int) error {
	var sendSeq, recvSeq byte
	buf := make([]byte, size)
	send := func(n int) error {
		for i := range buf[:n] {
			buf[i] = sendSeq
			sendSeq++
		}
		_, err := c.Write(buf[:n])
		return err
	}
	recv := func(n int) error {
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return err
		}
		for i, b := range buf[:n] {
			if b != recvSeq {
				return fmt.Errorf("byte %d of a %d-byte transfer is %d, want %d", i, n, b, recvSeq)
			}
			recvSeq++
		}
		return nil
	}
	first, second := recv, send
	if client {
		first, second = send, recv
	}
	if err := first(16); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := second(16); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	for range iters {
		for range count {
			if err := first(size); err != nil {
				return err
			}
		}
		for range count {
			if err := second(size); err != nil {
				return err
			}
		}
	}
	return nil
}

// Go against rdma-core's rstream, both roles, with rstream checking the
// data (-T v) and the Go side checking it too.
func TestRsocketRstreamInterop(t *testing.T) {
	devices(t, 2)
	for i, tc := range []struct {
		size, count, iters int
		goServer           bool
		extra              []string
		o                  rsocket.Options
	}{
		{size: 64, count: 100, iters: 2, goServer: true},
		{size: 64, count: 100, iters: 2},
		{size: 4096, count: 50, iters: 2, goServer: true},
		{size: 4096, count: 50, iters: 2},
		{size: 65536, count: 20, iters: 1, goServer: true},
		{size: 65536, count: 20, iters: 1},
		{size: 1 << 20, count: 4, iters: 1, goServer: true, o: rsocket.Options{SendBuffer: 1 << 20, RecvBuffer: 1 << 20}},
		{size: 1 << 20, count: 4, iters: 1},
		{size: 4096, count: 30, iters: 1, goServer: true, extra: []string{"-B", "65536", "-i", "0"}},
		{size: 4096, count: 30, iters: 1, extra: []string{"-B", "65536", "-i", "0"}},
		{size: 4096, count: 30, iters: 1, goServer: true, extra: []string{"-T", "b"}},
		{size: 100000, count: 10, iters: 1, extra: []string{"-T", "b"}},
	} {
		role := "GoClient"
		if tc.goServer {
			role = "GoServer"
		}
		t.Run(fmt.Sprintf("%s/%d/%s", role, tc.size, strings.Join(tc.extra, "")), func(t *testing.T) {
			port := 7710 + i
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			if tc.goServer {
				l, err := rsocket.Listen(ctx, "10.99.0.1:"+strconv.Itoa(port), tc.o)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				p := startPeer(t, 120*time.Second, "/usr/bin/rstream", append(rstreamArgs(port, tc.size, tc.count, tc.iters, tc.extra...), "-s", "10.99.0.1", "-b", "10.99.0.2")...)
				c, err := l.AcceptConn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(100 * time.Second))
				if err := rstreamPeer(c, false, tc.size, tc.count, tc.iters); err != nil {
					t.Errorf("Go server: %v", err)
				}
				out := p.wait(t)
				t.Logf("rstream client:\n%s", out)
				return
			}
			p := startPeer(t, 120*time.Second, "/usr/bin/rstream", append(rstreamArgs(port, tc.size, tc.count, tc.iters, tc.extra...), "-b", "10.99.0.1")...)
			var c *rsocket.Conn
			var err error
			o := tc.o
			o.Source = cmAddr1
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if c, err = rsocket.Dial(ctx, "10.99.0.1:"+strconv.Itoa(port), o); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(100 * time.Second))
			if err := rstreamPeer(c, true, tc.size, tc.count, tc.iters); err != nil {
				t.Errorf("Go client: %v", err)
			}
			c.Close()
			out := p.wait(t)
			t.Logf("rstream server:\n%s", out)
		})
	}
}
