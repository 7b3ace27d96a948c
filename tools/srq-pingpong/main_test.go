package main

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/qp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// ibv_srq_pingpong's defaults (rdma-core v44's main()) and every one of
// the options this tool has.
func TestDefaultsAndOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want options
	}{
		{nil, options{Options: pp.Options{Port: 18515, IBPort: 1, Size: 4096, RxDepth: 500, Iters: 1000, GIDIndex: -1}, mtu: uverbs.MTU1024, numQP: 16}},
		{[]string{"-q", "0x5", "--size=2000", "-n", "300", "-r", "64", "-g", "1", "-e", "-p", "18620", "-m", "2048", "-l", "3", "-d", "rxe1", "-i", "2", "host"}, options{
			Options: pp.Options{Server: "host", Port: 18620, IBDev: "rxe1", IBPort: 2, Size: 2000, RxDepth: 64, Iters: 300, SL: 3, Events: true, GIDIndex: 1},
			mtu:     uverbs.MTU2048,
			numQP:   5,
		}},
	} {
		got, err := parseOptions(tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
		} else if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(options{})); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
	for _, bad := range [][]string{{"-m", "1000"}, {"-q", "257"}, {"a", "b"}, {"-s", "0"}} {
		if _, err := parseOptions(bad); !errors.Is(err, pp.ErrUsage) {
			t.Errorf("%q: %v, want usage", bad, err)
		}
	}
}

// What ibv_srq_pingpong prints when it refuses its command line: getopt's
// message after the program name and the usage, or only its own message
// for more QPs than receives; exit status 1 either way.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		stdout, stderr string
	}{
		{[]string{"-x"}, "Usage:\n  srq-pingpong ", "srq-pingpong: invalid option -- 'x'\n"},
		{[]string{"--bogus"}, "Usage:\n  srq-pingpong ", "srq-pingpong: unrecognized option '--bogus'\n"},
		{[]string{"-m", "1000"}, "Usage:\n  srq-pingpong ", ""},
		{[]string{"-q", "8", "-r", "4"}, "", "rx_depth 4 is too small for 8 QPs -- must have at least one receive per QP.\n"},
	} {
		var stdout, stderr strings.Builder
		rc := run(append([]string{"srq-pingpong"}, tc.args...), &stdout, &stderr)
		if rc != 1 || !strings.HasPrefix(stdout.String(), tc.stdout) || (tc.stdout == "") != (stdout.Len() == 0) || stderr.String() != tc.stderr {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tc.args, rc, stdout.String(), stderr.String())
		}
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
