//go:build linux

// Command netpoll-bench measures UDP ping-pong round trips through each
// netpoll backend and through Go's plain net.UDPConn, side by side.
//
// By default the two ends sit in two network namespaces it creates, joined
// by a veth with GRO on (so the kernel has NAPI queues to busy-poll); that
// needs root. -netns=false uses loopback in the current namespace instead.
// Both ends run in this one process, each backend on both ends: a driver's
// loop spins on its own locked OS thread, so spinning backends keep two
// cores busy. By default (-pin 0,1) the server driver's thread is bound to
// CPU 0 and the client's to CPU 1 (sched_setaffinity on the locked thread),
// so two spinning ends never share a CPU. net.UDPConn's goroutines are not
// pinned: they block, and a locked goroutine pays a thread hand-off on every
// wake-up. Every run is bounded by -n and -timeout.
//
// Go's asynchronous preemption interrupts long-running spin loops with
// signals; compare with GODEBUG=asyncpreemptoff=1.
//
// Usage:
//
//	go run ./tools/netpoll-bench [flags]
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/netpoll"
	"github.com/pureverbs/pureverbs/netpoll/vethns"
)

// udpConnName labels the baseline: Go's netpoller through net.UDPConn.
const udpConnName = "net.UDPConn"

// options is the parsed command line.
type options struct {
	n, warmup, size int
	timeout, stall  time.Duration
	netns, gro      bool
	queues          int
	base            netpoll.Config
	runs            []string
	pin             *pinning
}

func main() {
	var o options
	var backends string
	flag.IntVar(&o.n, "n", 20000, "round trips measured per backend")
	flag.IntVar(&o.warmup, "warmup", 2000, "round trips before measuring")
	flag.IntVar(&o.size, "size", 64, "payload bytes (at least 16)")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "time limit per backend")
	flag.DurationVar(&o.stall, "stall", 50*time.Millisecond, "resend a ping after this long without its pong")
	flag.BoolVar(&o.netns, "netns", true, "run between two network namespaces over a veth (needs root); false: loopback")
	flag.BoolVar(&o.gro, "gro", true, "GRO on (and TSO off) on the veth, so it has NAPI queues")
	flag.IntVar(&o.queues, "queues", 1, "veth queues per direction")
	flag.DurationVar(&o.base.Wait, "wait", 0, "epoll-busy timeout / park limit (0: netpoll's default)")
	flag.DurationVar(&o.base.BusyPoll, "busy-poll", 0, "busy-poll time (0: netpoll's default)")
	budget := flag.Uint("budget", 0, "busy-poll budget (0: netpoll's default, 8)")
	flag.BoolVar(&o.base.PreferBusyPoll, "prefer-busy-poll", false, "prefer busy polling (needs CAP_NET_ADMIN for recv-busy)")
	flag.IntVar(&o.base.ParkAfter, "park-after", 0, "park: empty passes before blocking (0: netpoll's default)")
	flag.StringVar(&backends, "backends", strings.Join(allRuns(), ","), "comma-separated runs")
	pin := flag.String("pin", defaultPin(), "CPUs for the server's and the client's driver thread, \"server,client\" (empty: not pinned)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: netpoll-bench [flags]\n\n"+
			"UDP ping-pong through each netpoll backend and through net.UDPConn; prints\n"+
			"p50/p99/p99.9 round-trip time, round trips per second, and CPU time and heap\n"+
			"allocations per round trip (both ends: one process).\n\nruns: %s\n\n",
			strings.Join(allRuns(), ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	o.base.BusyPollBudget = uint16(*budget)
	o.runs = strings.Split(backends, ",")
	var err error
	if o.pin, err = parsePinning(*pin); err != nil {
		fmt.Fprintln(os.Stderr, "netpoll-bench:", err)
		os.Exit(2)
	}
	if o.size < 16 || o.n <= 0 || o.warmup < 1 {
		fmt.Fprintln(os.Stderr, "netpoll-bench: need -size >= 16, -n > 0, -warmup >= 1")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "netpoll-bench:", err)
		os.Exit(1)
	}
}

// defaultPin pins the ends to CPUs 0 and 1 when the process has both.
func defaultPin() string {
	if _, err := parsePinning("0,1"); err != nil {
		return ""
	}
	return "0,1"
}

// allRuns is the baseline then every backend shape.
func allRuns() []string {
	runs := []string{udpConnName}
	for _, b := range netpoll.Backends {
		runs = append(runs, b.String())
		if b == netpoll.RecvBusy {
			runs = append(runs, b.String()+"+per-queue")
		}
	}
	return runs
}

// topology is where the two ends live.
type topology struct {
	server, client func(func() error) error
	addr           netip.Addr
	describe       string
}

func run(o options) error {
	topo := topology{
		server:   func(f func() error) error { return f() },
		client:   func(f func() error) error { return f() },
		addr:     netip.MustParseAddr("127.0.0.1"),
		describe: "loopback",
	}
	if o.netns {
		pair, err := vethns.New(vethns.Config{Queues: o.queues, GRO: o.gro})
		if err != nil {
			return fmt.Errorf("%w (try -netns=false)", err)
		}
		defer pair.Close()
		topo.server, topo.client, topo.addr = pair.B.Do, pair.A.Do, pair.B.Addr
		topo.describe = fmt.Sprintf("veth between two netns, %d queue(s), GRO %v", o.queues, o.gro)
	}
	var results []result
	for k, name := range o.runs {
		port := uint16(7000 + k)
		var r result
		var err error
		if name == udpConnName {
			r, err = benchUDPConn(o, topo, port)
		} else {
			cfg := o.base
			cfg.PerQueue = strings.HasSuffix(name, "+per-queue")
			if cfg.Backend, err = netpoll.ParseBackend(strings.TrimSuffix(name, "+per-queue")); err != nil {
				return err
			}
			r, err = benchDriver(o, topo, port, cfg)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.name = name
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "%-22s done\n", name)
	}
	printTable(os.Stdout, o, topo.describe, results)
	return nil
}
