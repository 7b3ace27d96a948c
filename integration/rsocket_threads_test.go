//go:build integration

package integration

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
)

// 64 connections, each with a Read parked on both ends and a goroutine
// parked on its RDMA CM channel, hold no OS thread each: their waits park
// in the runtime's poller (fdwait's Netpoll mode), so the process has about
// as many threads as with none. Close wakes every parked Read: its own
// with net.ErrClosed, the peer's with io.EOF (the disconnect message)
// unless that end closed first.
func TestRsocketParkedThreads(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const conns = 64
	before := procThreads(t)
	l, err := rsocket.Listen(ctx, "10.99.0.1:7741", rsocket.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var all []net.Conn
	defer func() {
		for _, c := range all {
			c.Close()
		}
	}()
	accepted := make(chan net.Conn, conns)
	go func() {
		for range conns {
			a, err := l.AcceptConn(ctx)
			if err != nil {
				close(accepted)
				return
			}
			accepted <- a
		}
	}()
	for range conns {
		d, err := rsocket.Dial(ctx, "10.99.0.1:7741", rsocket.Options{Source: cmAddr1})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, d)
		a, ok := <-accepted
		if !ok {
			t.Fatal("accept failed")
		}
		all = append(all, a)
	}
	reads := make(chan error, len(all))
	for _, c := range all {
		go func() {
			var b [1]byte
			_, err := c.Read(b[:])
			reads <- err
		}()
	}
	time.Sleep(2 * time.Second) // every Read parks
	select {
	case err := <-reads:
		t.Fatalf("a Read returned %v with nothing sent", err)
	default:
	}
	during := procThreads(t)
	t.Logf("threads: %d before, %d with %d parked Reads and %d CM watches", before, during, len(all), len(all))
	if during-before > conns/4 {
		t.Errorf("%d parked Reads took %d threads more", len(all), during-before)
	}
	for _, c := range all {
		c.Close()
	}
	for range all {
		select {
		case err := <-reads:
			if !errors.Is(err, net.ErrClosed) && err != io.EOF {
				t.Errorf("Read after Close = %v, want net.ErrClosed or io.EOF", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("a parked Read still blocked a minute after Close")
		}
	}
}

// procThreads is the process's thread count (/proc/self/status).
func procThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}
