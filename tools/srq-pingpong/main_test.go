package main

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

func TestDefaultsAndOptions(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil || o.port != 18515 || o.numQP != 16 || o.rxDepth != 500 || o.iters != 1000 || o.size != 4096 ||
		o.mtu != uverbs.MTU1024 || o.gidIndex != -1 || o.ibPort != 1 || o.server != "" {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o, err = parseOptions([]string{"-q", "0x5", "--size=2000", "-n", "300", "-r", "64", "-g", "1", "-e", "-p", "18620", "-m", "2048", "-l", "3", "host"})
	if err != nil || o.numQP != 5 || o.size != 2000 || o.iters != 300 || o.rxDepth != 64 || o.gidIndex != 1 || !o.events ||
		o.port != 18620 || o.mtu != uverbs.MTU2048 || o.sl != 3 || o.server != "host" {
		t.Fatalf("parsed: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-m", "1000"}, {"-q", "257"}, {"a", "b"}, {"-s", "0"}} {
		if _, err := parseOptions(bad); !errors.Is(err, pp.ErrUsage) {
			t.Errorf("%q: %v, want usage", bad, err)
		}
	}
	if _, err := parseOptions([]string{"-q", "8", "-r", "4"}); err == nil || !strings.Contains(err.Error(), "rx_depth 4 is too small for 8 QPs") {
		t.Errorf("-q 8 -r 4: %v", err)
	}
}

// Both halves of the exchange over a socket pair: 256 records each way,
// zeros past -q, QP i to QP i, and "done".
func TestExchange(t *testing.T) {
	a, b := net.Pipe()
	var g uverbs.GID
	g[10], g[11], g[15] = 0xff, 0xff, 1
	cl := []qp.Peer{{QPN: 0x11, PSN: 0xabcdef, GID: g}, {QPN: 0x12, PSN: 1, GID: g}}
	sv := []qp.Peer{{QPN: 0x21, PSN: 2, GID: g}, {QPN: 0x22, PSN: 3, GID: g}}
	var raw bytes.Buffer
	if err := writeRecords(&raw, cl); err != nil {
		t.Fatal(err)
	}
	if raw.Len() != 256*52 || !strings.HasPrefix(raw.String(), "0000:000011:abcdef:00000000000000000000ffff00000001\x00") ||
		raw.String()[2*52:3*52] != "0000:000000:000000:00000000000000000000000000000000\x00" {
		t.Fatalf("records: %d bytes, %q...", raw.Len(), raw.String()[:3*52])
	}
	done := make(chan []qp.Peer, 1)
	var connected []qp.Peer
	go func() {
		r, err := serverExchange(b, sv, func(r []qp.Peer) error { connected = r; return nil })
		if err != nil {
			t.Error(err)
		}
		b.Close()
		done <- r
	}()
	got, err := clientExchange(a, cl)
	if err != nil {
		t.Fatal(err)
	}
	srvGot := <-done
	if len(got) != 2 || got[0] != sv[0] || got[1] != sv[1] || len(srvGot) != 2 || srvGot[1] != cl[1] || connected[0] != cl[0] {
		t.Fatalf("client got %+v, server got %+v", got, srvGot)
	}
}

// A silent client or server ends the other's exchange after the pingpong
// package's ExchangeTimeout; both used to wait for ever.
func TestExchangeSilentPeer(t *testing.T) {
	old := pp.ExchangeTimeout
	pp.ExchangeTimeout = 200 * time.Millisecond
	defer func() { pp.ExchangeTimeout = old }()
	timeout := func(f func() error) {
		t.Helper()
		errc := make(chan error, 1)
		go func() { errc <- f() }()
		select {
		case err := <-errc:
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("err = %v, want a timeout", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("still waiting after 5 s")
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	timeout(func() error {
		_, err := acceptExchange(ln, nil, func([]qp.Peer) error { return nil })
		return err
	})
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(5 * time.Second)
		}
	}()
	timeout(func() error {
		_, err := dialExchange("127.0.0.1", ln.Addr().(*net.TCPAddr).Port, nil)
		return err
	})
}
