//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
)

// patternWriter writes n bytes of a seeded pseudo-random stream in writes
// of random sizes; patternCheck reads the same stream back.
func patternWrite(w io.Writer, seed int64, n int, maxChunk int) error {
	src := rand.New(rand.NewSource(seed))
	sizes := rand.New(rand.NewSource(seed + 1))
	buf := make([]byte, maxChunk)
	for n > 0 {
		k := min(n, 1+sizes.Intn(maxChunk))
		src.Read(buf[:k])
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func patternCheck(r io.Reader, seed int64, n int, chunk int, pause func()) error {
	src := rand.New(rand.NewSource(seed))
	want := make([]byte, chunk)
	got := make([]byte, chunk)
	for off := 0; off < n; {
		k := min(n-off, chunk)
		if _, err := io.ReadFull(r, got[:k]); err != nil {
			return fmt.Errorf("at byte %d: %w", off, err)
		}
		src.Read(want[:k])
		for i := range got[:k] {
			if got[i] != want[i] {
				return fmt.Errorf("byte %d is %#x, want %#x", off+i, got[i], want[i])
			}
		}
		off += k
		if pause != nil {
			pause()
		}
	}
	return nil
}

// 48 MiB one way, checked byte by byte, then the end of the stream.
func TestRsocket48MiB(t *testing.T) {
	cli, srv := rsocketPair(t, 7730, rsocket.Options{})
	const size = 48 << 20
	errc := make(chan error, 1)
	go func() {
		err := patternWrite(cli, 48, size, 256<<10)
		if err == nil {
			err = cli.CloseWrite()
		}
		errc <- err
	}()
	srv.SetReadDeadline(time.Now().Add(5 * time.Minute))
	if err := patternCheck(srv, 48, size, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := srv.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after 48 MiB: %d, %v; want io.EOF", n, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// A reader far slower than its writer, on a small ring and a small
// credit window, gets everything in order: the writer waits for credits
// and ring halves instead of overrunning.
func TestRsocketSlowReader(t *testing.T) {
	o := rsocket.Options{RecvQueue: 16, SendQueue: 16, RecvBuffer: 16 << 10, SendBuffer: 16 << 10}
	cli, srv := rsocketPair(t, 7731, o)
	const size = 2 << 20
	errc := make(chan error, 1)
	go func() { errc <- patternWrite(cli, 7, size, 3000) }()
	n := 0
	srv.SetReadDeadline(time.Now().Add(5 * time.Minute))
	if err := patternCheck(srv, 7, size, 777, func() {
		if n++; n%64 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// One-byte writes: each is a message, so the 16 credits run out
	// again and again.
	go func() {
		var err error
		for i := range 2000 {
			if _, err = cli.Write([]byte{byte(i)}); err != nil {
				break
			}
		}
		errc <- err
	}()
	buf := make([]byte, 1)
	for i := range 2000 {
		if _, err := io.ReadFull(srv, buf); err != nil || buf[0] != byte(i) {
			t.Fatalf("byte %d: %#x, %v", i, buf[0], err)
		}
		if i%100 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// 64 connections on one Listener at once, each echoing its own stream.
func TestRsocket64Conns(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const conns, size = 64, 256 << 10
	l, err := rsocket.Listen(ctx, "10.99.0.1:7732", rsocket.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var served sync.WaitGroup
	defer served.Wait()
	go func() {
		for {
			c, err := l.AcceptConn(ctx)
			if err != nil {
				return
			}
			served.Add(1)
			go func() {
				defer served.Done()
				defer c.Close()
				io.Copy(c, c)
				c.CloseWrite()
			}()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := rsocket.Dial(ctx, "10.99.0.1:7732", rsocket.Options{Source: cmAddr1})
			if err != nil {
				errs <- fmt.Errorf("conn %d: %w", i, err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(4 * time.Minute))
			werr := make(chan error, 1)
			go func() {
				err := patternWrite(c, int64(i), size, 16<<10)
				if err == nil {
					err = c.CloseWrite()
				}
				werr <- err
			}()
			if err := patternCheck(c, int64(i), size, 10000, nil); err != nil {
				errs <- fmt.Errorf("conn %d: %w", i, err)
			}
			if err := <-werr; err != nil {
				errs <- fmt.Errorf("conn %d: write: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A peer killed in the middle of a transfer: the Go side's blocked Read
// and Write end with an error (or io.EOF for the Read) within a bound.
func TestRsocketKilledPeer(t *testing.T) {
	devices(t, 2)
	for i, goServer := range []bool{false, true} {
		t.Run(strconv.FormatBool(goServer), func(t *testing.T) {
			port := 7733 + i
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// rstream's long bandwidth-style run: it is killed long
			// before the end.
			args := rstreamArgs(port, 65536, 100000, 1)
			var c *rsocket.Conn
			var p *peer
			if goServer {
				l, err := rsocket.Listen(ctx, "10.99.0.1:"+strconv.Itoa(port), rsocket.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				p = startPeer(t, 2*time.Minute, "/usr/bin/rstream", append(args, "-s", "10.99.0.1", "-b", "10.99.0.2")...)
				if c, err = l.AcceptConn(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				p = startPeer(t, 2*time.Minute, "/usr/bin/rstream", append(args, "-b", "10.99.0.1")...)
				var err error
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					if c, err = rsocket.Dial(ctx, "10.99.0.1:"+strconv.Itoa(port), rsocket.Options{Source: cmAddr1}); err == nil || time.Now().After(deadline) {
						break
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			defer c.Close()
			// The Go end only reads after the sync: as server it waits
			// for the client's transfers, as client it writes them
			// (and rstream reads).
			done := make(chan error, 1)
			go func() { done <- rstreamPeer(c, !goServer, 65536, 100000, 1) }()
			time.Sleep(2 * time.Second)
			p.cmd.Process.Kill()
			start := time.Now()
			select {
			case err := <-done:
				t.Logf("after the kill: %v in %v", err, time.Since(start))
				if err == nil {
					t.Fatal("the transfer succeeded against a killed peer")
				}
				var want bool
				want = errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || err != nil
				if !want {
					t.Fatal(err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("no error 60 s after the peer was killed")
			}
		})
	}
}

// Once a connection is up, Write and Read allocate nothing. Each write
// fits in the ring whatever the position (at most half of it), since the
// test reads only after writing. The same with ThreadWait.
func TestRsocketAllocs(t *testing.T) {
	t.Run("netpoll", func(t *testing.T) { testRsocketAllocs(t, 7735, rsocket.Options{}) })
	t.Run("thread", func(t *testing.T) { testRsocketAllocs(t, 7737, rsocket.Options{ThreadWait: true}) })
}

func testRsocketAllocs(t *testing.T, port int, o rsocket.Options) {
	cli, srv := rsocketPair(t, port, o)
	for _, size := range []int{64, 4096, 65536} {
		out, in := make([]byte, size), make([]byte, size)
		var err error
		allocs := testing.AllocsPerRun(200, func() {
			if _, err = cli.Write(out); err != nil {
				return
			}
			_, err = io.ReadFull(srv, in)
		})
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Errorf("%d-byte Write and Read: %v allocations per round", size, allocs)
		}
	}
}
