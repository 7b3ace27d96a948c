//go:build integration

package integration

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// streamBenchRow is one row of the Go-vs-C rstream table: a latency test
// (one transfer each way, n iterations: usec/xfer) or a bandwidth test (n
// transfers each way, one iteration: Gb/sec) of size bytes.
type streamBenchRow struct {
	size, n int
	lat     bool
}

func (r streamBenchRow) metric() string {
	if r.lat {
		return "lat"
	}
	return "bw"
}

func (r streamBenchRow) args() []string {
	count, iters := r.n, 1
	if r.lat {
		count, iters = 1, r.n
	}
	return []string{"-S", strconv.Itoa(r.size), "-C", strconv.Itoa(count), "-I", strconv.Itoa(iters)}
}

// streamBenchRows are sized for TCG: each run moves a few MiB at most.
// The 1 MiB rows, which take most of the time, come only with
// RXEVM_BENCH_FULL=1 (make bench-stream FULL=1).
func streamBenchRows() []streamBenchRow {
	sizes := []int{64, 4096, 65536}
	if os.Getenv("RXEVM_BENCH_FULL") == "1" {
		sizes = append(sizes, 1<<20)
	}
	var rows []streamBenchRow
	for _, lat := range []bool{true, false} {
		for _, size := range sizes {
			n := map[int]int{64: 2000, 4096: 500, 65536: 50, 1 << 20: 6}[size]
			if lat {
				n = map[int]int{64: 300, 4096: 100, 65536: 20, 1 << 20: 4}[size]
			}
			rows = append(rows, streamBenchRow{size, n, lat})
		}
	}
	return rows
}

// streamBenchPort hands each run a port of its own.
var streamBenchPort = 7900

// streamBenchRun runs one pair and returns the row's figure (usec/xfer
// for latency, Gb/sec for bandwidth) as the C peer
// the compared runs share prints it (the client when the compared end is
// the server, the server when it is the client); over TCP (both ends C,
// -T s) the client's. NaN when the pair failed twice.
func streamBenchRun(t *testing.T, r streamBenchRow, goEnd, goIsServer, tcp bool) float64 {
	t.Helper()
	args := r.args()
	if benchNoPolling() != "" {
		// Both ends block (-T b): a spinning non-blocking end would
		// measure the guest's timer tick, not the protocol. rsocket then
		// polls for its polling_time before it sleeps on the channel.
		args = append(args, "-T", "b")
	}
	// RXEVM_BENCH_STREAM_FLAGS adds flags to both ends of every pair
	// ("-T b": blocking calls on the host's clock too).
	args = append(args, strings.Fields(os.Getenv("RXEVM_BENCH_STREAM_FLAGS"))...)
	if tcp {
		args = append(args, "-T", "s")
	}
	for try := 1; ; try++ {
		streamBenchPort++
		p := streamPair{tool: "rstream", goServer: goEnd && goIsServer, goClient: goEnd && !goIsServer, args: args, port: streamBenchPort}
		so, co, err := p.try(t)
		if err == nil {
			out := so
			if goIsServer || tcp {
				out = co
			}
			m := streamRow.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no result row in\n%s", out)
			}
			// usec/xfer; bandwidth from it rather than from the Gb/sec
			// column, whose two decimals are too coarse at 64 B under TCG.
			usec, _ := strconv.ParseFloat(m[8], 64)
			if r.lat {
				return usec
			}
			return float64(r.size) * 8 / (usec * 1000)
		}
		t.Logf("FAILED RUN (go=%v, go is server=%v, tcp=%v, try %d): %v", goEnd, goIsServer, tcp, try, err)
		if try == 2 {
			return math.NaN()
		}
	}
}

// TestRstreamBench compares tools/rstream with librdmacm's rstream at
// 64 B, 4 KiB and 64 KiB (and 1 MiB with RXEVM_BENCH_FULL=1), latency (usec/xfer) and bandwidth
// (Gb/sec), in one boot: benchRounds rounds, in each the Go and the C end
// taking turns (the order alternating between rounds) against the same C
// peer, as server and as client; and the same row over kernel TCP (C
// rstream -T s at both ends, between the same two addresses: in the VM's
// one namespace the kernel carries it over lo, not the veth). It prints
// the medians as a table and one STREAM-RATIO line per row and role
// (end= the role Go played, tcp= TCP's median in the row's unit). Only
// with RXEVM_BENCH=1; RXEVM_BENCHROWS=regexp picks rows by "metric/size".
// Where polling cannot be measured (benchNoPolling: -icount, one vCPU)
// every pair runs blocking (-T b), the table's mode line says so.
func TestRstreamBench(t *testing.T) {
	if os.Getenv("RXEVM_BENCH") != "1" {
		t.Skip("benchmark: runs with RXEVM_BENCH=1")
	}
	devices(t, 2)
	rounds := benchRounds()
	rows := streamBenchRows()
	if expr := os.Getenv("RXEVM_BENCHROWS"); expr != "" {
		re := regexp.MustCompile(expr)
		rows = slices.DeleteFunc(rows, func(r streamBenchRow) bool { return !re.MatchString(fmt.Sprintf("%s/%d", r.metric(), r.size)) })
	}
	cells := make([][2]benchCell, len(rows))
	tcp := make([][]float64, len(rows))
	start := time.Now()
	for round := range rounds {
		for i, r := range rows {
			for side, goIsServer := range []bool{false, true} {
				c := &cells[i][side]
				runGo := func() { c.goV = append(c.goV, streamBenchRun(t, r, true, goIsServer, false)) }
				runC := func() { c.cV = append(c.cV, streamBenchRun(t, r, false, goIsServer, false)) }
				if round%2 == 0 {
					runGo()
					runC()
				} else {
					runC()
					runGo()
				}
			}
			tcp[i] = append(tcp[i], streamBenchRun(t, r, false, false, true))
		}
		t.Logf("round %d of %d done after %v", round+1, rounds, time.Since(start).Round(time.Second))
		table, lines := streamBenchTable(rows, cells, tcp, round+1)
		if round+1 < rounds {
			t.Logf("after %d rounds:\n%s%s", round+1, table, lines)
		} else {
			t.Logf("Go rstream vs C rstream (%s%s, one boot):\n%s", benchMode(), streamBenchCalls(), table)
			fmt.Print(lines)
		}
	}
}

// streamBenchTable formats the medians so far as a table and as
// STREAM-RATIO lines.
func streamBenchTable(rows []streamBenchRow, cells [][2]benchCell, tcp [][]float64, rounds int) (string, string) {
	var table, lines strings.Builder
	fmt.Fprintf(&table, "| size | metric | Go end | Go (median of %d) | C (median) | Go/C | TCP (median) | Go rounds | C rounds |\n|---|---|---|---|---|---|---|---|---|\n", rounds)
	for i, r := range rows {
		unit := "Gb/sec"
		if r.lat {
			unit = "usec/xfer"
		}
		tm := medianFinite(tcp[i])
		for side, role := range []string{"client", "server"} {
			c := cells[i][side]
			g, cm := medianFinite(c.goV), medianFinite(c.cV)
			fmt.Fprintf(&table, "| %d | %s %s | %s | %.4g | %.4g | %.3f | %.4g | %.4g | %.4g |\n", r.size, r.metric(), unit, role, g, cm, g/cm, tm, c.goV, c.cV)
			fmt.Fprint(&lines, streamRatioLine(r.size, r.metric(), g, cm, role, tm))
		}
	}
	return table.String(), lines.String()
}

// streamRatioLine is one STREAM-RATIO line: the form, then the
// role Go played and TCP's figure as extra fields.
func streamRatioLine(size int, metric string, goV, cV float64, end string, tcpV float64) string {
	return fmt.Sprintf("STREAM-RATIO size=%d metric=%s go=%.4g c=%.4g ratio=%.3f end=%s tcp=%.4g\n", size, metric, goV, cV, goV/cV, end, tcpV)
}

// streamBenchCalls names the calls both ends make, for the table's title.
func streamBenchCalls() string {
	extra := ""
	if f := os.Getenv("RXEVM_BENCH_STREAM_FLAGS"); f != "" {
		extra = ", both ends " + f
	}
	if benchNoPolling() != "" {
		return "; blocking calls (-T b)" + extra
	}
	return "; non-blocking calls" + extra
}
