//go:build integration

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestRstreamTraceAccount is the per-transfer account of the rstream
// latency test at 64 B with blocking calls (-T b), each pair of the bench
// (C against C, the Go server against the C client, the C server against
// the Go client): each runs under the kernel's tracer twice, with n and 2n
// iterations, and the difference divided by n is what one round trip (64
// B each way) costs both ends, as TestEventTraceAccount counts it (under
// -icount, ticks are guest instructions), with the packets each rxe device
// sent and received, from its counters. RXEVM_TRACE_ITERS sets n (300);
// RXEVM_TRACE_BW=1 accounts the bandwidth test instead (n transfers each
// way, one iteration: the figures are per transfer pair). Only with
// RXEVM_BENCH=1 and RXEVM_PROFILE=1.
func TestRstreamTraceAccount(t *testing.T) {
	if os.Getenv("RXEVM_BENCH") != "1" || os.Getenv("RXEVM_PROFILE") != "1" {
		t.Skip("profile: runs with RXEVM_BENCH=1 RXEVM_PROFILE=1")
	}
	devs := devices(t, 2)
	n := 300
	if v, err := strconv.Atoi(os.Getenv("RXEVM_TRACE_ITERS")); err == nil && v > 0 {
		n = v
	}
	bw := os.Getenv("RXEVM_TRACE_BW") == "1"
	test := "latency"
	if bw {
		test = "bandwidth"
	}
	port := 7950
	for _, c := range []struct {
		name               string
		goServer, goClient bool
	}{{"C server, C client", false, false}, {"Go server, C client", true, false}, {"C server, Go client", false, true}} {
		var acc [2]*cpuAccount
		var pids [2][2]int
		var usec [2]string
		var pkts [2][2]map[string]uint64 // [run][before, after] of both devices
		for k, iters := range []int{n, 2 * n} {
			port++
			count, its := 1, iters
			if bw {
				count, its = iters, 1
			}
			p := streamPair{tool: "rstream", goServer: c.goServer, goClient: c.goClient, port: port, pids: &pids[k],
				args: []string{"-S", "64", "-C", strconv.Itoa(count), "-I", strconv.Itoa(its), "-T", "b"}}
			acc[k] = traceRun(t, func() {
				pkts[k][0] = rxeCounts(t, devs)
				so, _ := p.run(t)
				pkts[k][1] = rxeCounts(t, devs)
				if m := streamRow.FindStringSubmatch(so); m != nil {
					usec[k] = m[8]
				}
			})
		}
		var sb strings.Builder
		for _, name := range []string{devs[0] + "/sent_pkts", devs[0] + "/rcvd_pkts", devs[1] + "/sent_pkts", devs[1] + "/rcvd_pkts"} {
			d0 := pkts[0][1][name] - pkts[0][0][name]
			d1 := pkts[1][1][name] - pkts[1][0][name]
			fmt.Fprintf(&sb, "  %-16s %6.2f/iter\n", name, float64(int64(d1)-int64(d0))/float64(n))
		}
		t.Logf("64 B %s -T b, %s, server usec/xfer %s (n=%d) %s (2n):\n%s%s", test, c.name, usec[0], n, usec[1], accountDiff(acc, pids, n), sb.String())
	}
}

// rxeCounts reads the packet counters of devs, keyed "dev/counter".
func rxeCounts(t *testing.T, devs []string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, d := range devs[:2] {
		for k, v := range hwCounters(t, d) {
			m[d+"/"+k] = v
		}
	}
	return m
}
