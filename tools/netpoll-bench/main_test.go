//go:build linux

package main

import (
	"bytes"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/netpoll"
	"github.com/pureverbs/pureverbs/netpoll/vethns"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i))
	}
	for q, want := range map[float64]time.Duration{0.5: 500, 0.99: 990, 0.999: 999, 1: 1000, 0: 1} {
		if got := percentile(s, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Errorf("percentile of nothing")
	}
}

// A short run of every row, over loopback (and over the veth when root),
// measures every round trip and prints one line each.
func TestShortRuns(t *testing.T) {
	o := options{n: 300, warmup: 30, size: 64, timeout: 20 * time.Second, stall: 20 * time.Millisecond,
		base: netpoll.Config{Wait: 2 * time.Millisecond}}
	o.pin, _ = parsePinning(defaultPin())
	topos := map[string]topology{"loopback": {
		server: func(f func() error) error { return f() },
		client: func(f func() error) error { return f() },
		addr:   netip.MustParseAddr("127.0.0.1"), describe: "loopback",
	}}
	if os.Geteuid() == 0 {
		pair, err := vethns.New(vethns.Config{GRO: true})
		if err != nil {
			t.Fatal(err)
		}
		defer pair.Close()
		topos["veth"] = topology{server: pair.B.Do, client: pair.A.Do, addr: pair.B.Addr, describe: "veth"}
	}
	for name, topo := range topos {
		t.Run(name, func(t *testing.T) {
			var results []result
			for k, run := range allRuns() {
				var r result
				var err error
				if run == udpConnName {
					r, err = benchUDPConn(o, topo, uint16(9000+k))
				} else {
					cfg := o.base
					cfg.PerQueue = strings.HasSuffix(run, "+per-queue")
					cfg.Backend, _ = netpoll.ParseBackend(strings.TrimSuffix(run, "+per-queue"))
					r, err = benchDriver(o, topo, uint16(9000+k), cfg)
				}
				if err != nil {
					t.Fatalf("%s: %v", run, err)
				}
				if r.timedOut || len(r.rtts) != o.n || r.elapsed <= 0 || r.cpu <= 0 {
					t.Errorf("%s: timed out %v, %d round trips, elapsed %v, cpu %v", run, r.timedOut, len(r.rtts), r.elapsed, r.cpu)
				}
				r.name = run
				results = append(results, r)
			}
			var out bytes.Buffer
			printTable(&out, o, topo.describe, results)
			for _, run := range allRuns() {
				if !strings.Contains(out.String(), run) {
					t.Errorf("table lacks %s:\n%s", run, out.String())
				}
			}
			t.Log("\n" + out.String())
		})
	}
}
