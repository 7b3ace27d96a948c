//go:build integration

package integration

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The two implementations of the same command line: rdma-core's C tool and
// pureverbs' tools/rc-pingpong (installed on PATH in the VM).
const (
	cPingpong  = "ibv_rc_pingpong"
	goPingpong = "rc-pingpong"
)

// pingpongRun is one server/client pair of rc-pingpong-style tools: the
// server on rxe0 (10.99.0.1), the client on rxe1 across the veth pair.
type pingpongRun struct {
	server, client string // cPingpong or goPingpong
	size, iters    int    // 0: the tools' defaults (4096, 1000)
	mtu, rxDepth   int    // 0: default (1024, 500)
	port           int    // 0: default 18515
	serverEvents   bool
	clientEvents   bool
	validate       bool
}

func (r pingpongRun) args(t testing.TB, dev string, events bool) []string {
	args := []string{"-d", dev, "-g", gidArg(t, dev)}
	for _, f := range []struct {
		flag string
		v    int
	}{{"-s", r.size}, {"-n", r.iters}, {"-m", r.mtu}, {"-r", r.rxDepth}, {"-p", r.port}} {
		if f.v != 0 {
			args = append(args, f.flag, strconv.Itoa(f.v))
		}
	}
	if events {
		args = append(args, "-e")
	}
	if r.validate {
		args = append(args, "-c")
	}
	return args
}

func (r pingpongRun) sizeIters() (int, int) {
	size, iters := r.size, r.iters
	if size == 0 {
		size = 4096
	}
	if iters == 0 {
		iters = 1000
	}
	return size, iters
}

// run starts the server, waits until it listens, runs the client, and
// returns both outputs, failing on a non-zero exit or a timeout.
func (r pingpongRun) run(t *testing.T, limit time.Duration) (serverOut, clientOut string) {
	t.Helper()
	srv, cli := r.start(t, limit)
	clientOut = cli.wait(t)
	return srv.wait(t), clientOut
}

// start starts the server, waits until it listens, and starts the client.
func (r pingpongRun) start(t *testing.T, limit time.Duration) (srv, cli *peer) {
	t.Helper()
	devs := devices(t, 2)
	port := r.port
	if port == 0 {
		port = 18515
	}
	srv = startPeer(t, limit, r.server, r.args(t, devs[0], r.serverEvents)...)
	waitListening(t, srv, port, 30*time.Second)
	return srv, startPeer(t, limit, r.client, append(r.args(t, devs[1], r.clientEvents), "10.99.0.1")...)
}

var pingpongAddr = regexp.MustCompile(`(?m)^  (local|remote) address: +LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6})[,:] GID (\S+)$`)

// addresses returns the "local address" and "remote address" lines' fields
// (LID, QPN, PSN, GID) of one end's output.
func addresses(t *testing.T, side, out string) (local, remote [4]string) {
	t.Helper()
	m := pingpongAddr.FindAllStringSubmatch(out, -1)
	if len(m) != 2 || m[0][1] != "local" || m[1][1] != "remote" {
		t.Fatalf("%s did not print its local and then its remote address:\n%s", side, out)
	}
	copy(local[:], m[0][2:])
	copy(remote[:], m[1][2:])
	return local, remote
}

// checkPair checks both ends: each printed what the other sent, the GIDs
// are the veth addresses, the summaries count 2*size*iters bytes and iters
// iterations, and -c found no bad page.
func (r pingpongRun) checkPair(t *testing.T, serverOut, clientOut string) {
	t.Helper()
	size, iters := r.sizeIters()
	sl, sr := addresses(t, "server "+r.server, serverOut)
	cl, cr := addresses(t, "client "+r.client, clientOut)
	if sl != cr || cl != sr {
		t.Errorf("the ends disagree on the addresses: server local %v remote %v, client local %v remote %v", sl, sr, cl, cr)
	}
	if sl[3] != "::ffff:10.99.0.1" || cl[3] != "::ffff:10.99.0.2" {
		t.Errorf("GIDs: server %s, client %s; want ::ffff:10.99.0.1 and ::ffff:10.99.0.2", sl[3], cl[3])
	}
	if sl[0] != "0000" || cl[0] != "0000" {
		t.Errorf("LIDs on RoCE: server %s, client %s; want 0000", sl[0], cl[0])
	}
	checkPingpong(t, "server "+r.server, serverOut, size, iters)
	checkPingpong(t, "client "+r.client, clientOut, size, iters)
	for _, side := range []struct{ name, tool, out string }{{"server", r.server, serverOut}, {"client", r.client, clientOut}} {
		if strings.Contains(side.out, "invalid data") {
			t.Errorf("%s found bad pages:\n%s", side.name, side.out)
		}
		if side.tool == goPingpong && os.Getenv("RC_PINGPONG_MALLOCS") == "1" {
			// After the warm-up the loop allocates nothing at all: not one
			// allocation in any iteration.
			m := pingpongMallocs.FindStringSubmatch(side.out)
			if m == nil {
				t.Errorf("%s %s printed no allocation count:\n%s", side.name, side.tool, side.out)
			} else if n, _ := strconv.Atoi(m[1]); n != 0 {
				t.Errorf("%s %s: %s heap allocations in the %s iterations after a warm-up of %s, want 0:\n%s", side.name, side.tool, m[1], m[2], m[3], side.out)
			}
		}
	}
}

var pingpongMallocs = regexp.MustCompile(`rc-pingpong: (\d+) heap allocations in the (\d+) iterations after a warm-up of (\d+)`)

// Go against C both ways, and Go against Go: polling and events, messages
// from 1 byte (inline) to 64 KiB (64 packets at path MTU 1024), non-default
// counts, receive depths and ports, and the defaults. The Go ends also
// report their heap allocations during the exchange: none from the loop.
func TestRCPingpong(t *testing.T) {
	t.Setenv("RC_PINGPONG_MALLOCS", "1")
	for _, tc := range []struct {
		name string
		r    pingpongRun
	}{
		{"GoClientCServer/poll", pingpongRun{server: cPingpong, client: goPingpong, size: 4096, iters: 200, mtu: 1024, port: 18610}},
		{"GoClientCServer/events", pingpongRun{server: cPingpong, client: goPingpong, size: 65536, iters: 20, mtu: 1024, rxDepth: 8, port: 18611, serverEvents: true, clientEvents: true}},
		{"GoClientCServer/chk", pingpongRun{server: cPingpong, client: goPingpong, size: 16384, iters: 30, rxDepth: 3, port: 18612, validate: true}},
		{"CClientGoServer/poll", pingpongRun{server: goPingpong, client: cPingpong, size: 65536, iters: 20, mtu: 1024, rxDepth: 4, port: 18613}},
		{"CClientGoServer/events", pingpongRun{server: goPingpong, client: cPingpong, size: 100, iters: 300, port: 18614, serverEvents: true, clientEvents: true}},
		{"CClientGoServer/chk", pingpongRun{server: goPingpong, client: cPingpong, size: 12288, iters: 30, mtu: 512, port: 18615, validate: true, clientEvents: true}},
		{"GoGo/poll", pingpongRun{server: goPingpong, client: goPingpong, size: 1, iters: 500, rxDepth: 2, port: 18616}},
		{"GoGo/events", pingpongRun{server: goPingpong, client: goPingpong, size: 4096, iters: 100, mtu: 512, port: 18617, serverEvents: true, clientEvents: true}},
		{"GoGo/mixed", pingpongRun{server: goPingpong, client: goPingpong, size: 65536, iters: 20, rxDepth: 1, port: 18618, clientEvents: true}},
		{"GoGo/defaults", pingpongRun{server: goPingpong, client: goPingpong}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := tc.r.run(t, 2*time.Minute)
			tc.r.checkPair(t, srv, cli)
		})
	}
}

// The Go tool refuses what ibv_rc_pingpong refuses, with its usage text.
func TestRCPingpongUsage(t *testing.T) {
	for _, args := range [][]string{{"-m", "1500"}, {"-x"}, {"a", "b"}, {"-p", "70000"}} {
		p := startPeer(t, 30*time.Second, goPingpong, args...)
		<-p.done
		out := p.out.String()
		if p.err == nil || !strings.Contains(out, "Usage:") || !strings.Contains(out, "-r, --rx-depth=<dep>") {
			t.Errorf("rc-pingpong %q: err %v, output:\n%s", args, p.err, out)
		}
	}
	p := startPeer(t, 30*time.Second, goPingpong, "-d", "nosuchdev")
	<-p.done
	if out := p.out.String(); p.err == nil || !strings.Contains(out, "IB device nosuchdev not found") {
		t.Errorf("rc-pingpong -d nosuchdev: err %v, output:\n%s", p.err, out)
	}
}

// Options rxe cannot honour fail in both tools before any connection: on
// 6.1's rxe there is no on-demand paging and no completion timestamp.
func TestRCPingpongUnsupported(t *testing.T) {
	dev := devices(t, 1)[0]
	for _, tc := range []struct {
		flag      string
		c, goWant string
	}{
		{"-o", "The device isn't ODP capable", "Couldn't register MR"},
		{"-t", "The device isn't completion timestamp capable", "The device isn't completion timestamp capable"},
	} {
		for tool, want := range map[string]string{cPingpong: tc.c, goPingpong: tc.goWant} {
			// As a client of a port nobody listens on: should the option be
			// taken, the tool fails at the connection instead.
			p := startPeer(t, 30*time.Second, tool, "-d", dev, "-g", gidArg(t, dev), "-p", "18699", tc.flag, "10.99.0.1")
			<-p.done
			if out := p.out.String(); p.err == nil || !strings.Contains(out, want) {
				t.Errorf("%s %s: err %v, want a failure saying %q:\n%s", tool, tc.flag, p.err, want, out)
			}
		}
	}
}

// TestSideBySideRCPingpong measures the C tool and the Go tool with the same
// parameters in one boot, interleaved (C, Go, C, Go, ... for
// benchRounds rounds), and logs a table of the client's
// usec/iter and Mbit/s with the median of each and the Go/C ratio of the
// medians with its bootstrap 95 % interval (under TCG on the host's clock
// the host's load makes single runs swing by 10x; RXEVM_ICOUNT takes the
// load out). RXEVM_BENCH_VARIANTS=1 adds Go without async preemption and Go
// on one P to every round. Only under make bench-vm (RXEVM_BENCH=1).
func TestSideBySideRCPingpong(t *testing.T) {
	if os.Getenv("RXEVM_BENCH") != "1" {
		t.Skip("a benchmark: runs only under make bench-vm (RXEVM_BENCH=1)")
	}
	rounds := benchRounds()
	type tool struct {
		name, bin         string
		serverBin         string // when the server is another program than bin
		godebug, maxprocs string
	}
	tools := []tool{
		{name: "C ibv_rc_pingpong", bin: cPingpong},
		{name: "Go rc-pingpong", bin: goPingpong},
	}
	if os.Getenv("RXEVM_BENCH_VARIANTS") == "1" {
		tools = append(tools,
			// Go's async preemption signals interrupt a spinning poll loop.
			tool{name: "Go asyncpreemptoff", bin: goPingpong, godebug: "asyncpreemptoff=1"},
			// One P: no idle runtime threads spinning for work next to rxe.
			tool{name: "Go GOMAXPROCS=1", bin: goPingpong, maxprocs: "1"},
			// Mixed pairs say on which side the time goes.
			tool{name: "Go client, C server", bin: goPingpong, serverBin: cPingpong},
			tool{name: "C client, Go server", bin: cPingpong, serverBin: goPingpong})
	}
	type result struct{ usec, mbits, cpu []float64 }
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d interleaved rounds, %s; Go/C with its bootstrap 95 %% interval\n%-12s %-19s %-26s %-40s %-12s %-26s %s\n", rounds, benchMode(), "params", "tool", "Go/C", "usec/iter (median; runs)", "CPU us/iter", "CPU Go/C", "Mbit/s (median; runs)")
	// The same medians as a Markdown table, for tools/rc-pingpong/README.md.
	var md strings.Builder
	fmt.Fprintf(&md, "| params | tool | usec/iter (median of %d) | Go/C [95 %% interval] | CPU usec/iter | CPU Go/C [95 %% interval] | Mbit/s | usec/iter, every run |\n|---|---|---|---|---|---|---|---|\n", rounds)
	port := 18700
	for _, c := range []struct {
		name        string
		size, iters int
		events      bool
	}{
		{"64 B -e", 64, 1000, true},
		{"4096 B -e", 4096, 1000, true},
		{"64 B poll", 64, 1000, false},
		{"4096 B poll", 4096, 1000, false},
		{"64 KiB poll", 65536, 100, false},
		{"64 KiB -e", 65536, 100, true},
	} {
		res := make([]result, len(tools))
		if why := benchNoPolling(); why != "" && !c.events {
			t.Logf("%s: skipped: %s", c.name, why)
			continue
		}
		for round := 0; round < rounds; round++ {
			for i, tool := range tools {
				port++
				t.Run(fmt.Sprintf("%s/%s/%d", c.name, tool.name, round+1), func(t *testing.T) {
					t.Setenv("GODEBUG", tool.godebug)
					t.Setenv("GOMAXPROCS", tool.maxprocs)
					server := tool.bin
					if tool.serverBin != "" {
						server = tool.serverBin
					}
					r := pingpongRun{server: server, client: tool.bin, size: c.size, iters: c.iters,
						port: port, serverEvents: c.events, clientEvents: c.events}
					sp, cp := r.start(t, 5*time.Minute)
					cli := cp.wait(t)
					srv := sp.wait(t)
					r.checkPair(t, srv, cli)
					// Both ends' CPU time (user and system), per iteration.
					res[i].cpu = append(res[i].cpu, float64((cpuTime(sp)+cpuTime(cp)).Microseconds())/float64(c.iters))
					mbits, _ := strconv.ParseFloat(pingpongBytes.FindStringSubmatch(cli)[3], 64)
					usec, _ := strconv.ParseFloat(pingpongIters.FindStringSubmatch(cli)[3], 64)
					res[i].usec = append(res[i].usec, usec)
					res[i].mbits = append(res[i].mbits, mbits)
				})
			}
		}
		for i, tool := range tools {
			ratio, cpuRatio, cpu := "-", "-", "-"
			if i > 0 {
				ratio = benchRatio(res[i].usec, res[0].usec)
				cpuRatio = benchRatio(res[i].cpu, res[0].cpu)
			}
			if len(res[i].cpu) > 0 {
				cpu = strconv.FormatFloat(median(res[i].cpu), 'f', 0, 64)
			}
			fmt.Fprintf(&sb, "%-12s %-19s %-26s %-40s %-12s %-26s %s\n", c.name, tool.name, ratio, summarize(res[i].usec, 0), cpu, cpuRatio, summarize(res[i].mbits, 2))
			usec, mbits, runs := "-", "-", "-"
			if len(res[i].usec) > 0 {
				usec = strconv.FormatFloat(median(res[i].usec), 'f', 0, 64)
				mbits = strconv.FormatFloat(median(res[i].mbits), 'f', 2, 64)
				runs = strings.TrimPrefix(summarize(res[i].usec, 0), usec+"; ")
			}
			fmt.Fprintf(&md, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.name, tool.name, usec, ratio, cpu, cpuRatio, mbits, runs)
		}
	}
	t.Log(sb.String())
	if err := benchMarkdown("rc-pingpong", md.String()); err != nil {
		t.Error(err)
	}
}

// median is the middle value of xs (the upper one of the two middle values
// for an even count), as summarize prints it.
func median(xs []float64) float64 {
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// summarize formats the median and then every value of xs, with prec
// decimals.
func summarize(xs []float64, prec int) string {
	if len(xs) == 0 {
		return "-"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', prec, 64)
	}
	return strconv.FormatFloat(median(xs), 'f', prec, 64) + "; " + strings.Join(parts, " ")
}
