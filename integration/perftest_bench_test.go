//go:build integration

package integration

import (
	"encoding/base64"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// perftestBenchRow is one row of the Go-vs-C perftest table.
type perftestBenchRow struct {
	tool  string
	size  int
	iters int
	lat   bool
}

func perftestBenchRows() []perftestBenchRow {
	var rows []perftestBenchRow
	for _, tool := range []string{"ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat", "ib_write_lat", "ib_read_lat", "ib_atomic_lat"} {
		lat := strings.HasSuffix(tool, "_lat")
		sizes := []int{64, 4096, 65536}
		if strings.HasPrefix(tool, "ib_atomic") {
			sizes = []int{8}
		}
		for _, s := range sizes {
			n := map[int]int{8: 1000, 64: 1000, 4096: 500, 65536: 60}[s]
			if lat {
				// Small messages run long enough for the pairs' steady
				// state: a C ib_send_lat pair (64 B, -e, icount, 6.1)
				// has a median of 33.56 us over its first few hundred
				// iterations and 34.91 us from then on, so 200 of
				// them measured its start-up (the Go client's: 35.27,
				// then 35.52).
				n = map[int]int{8: 2000, 64: 2000, 4096: 200, 65536: 50}[s]
			}
			rows = append(rows, perftestBenchRow{tool, s, n, lat})
		}
	}
	return rows
}

// benchPerftestRun runs one pair and returns the figure the comparison
// uses: BW average (MB/sec) or t_typical (usec), read from the C peer the
// two pairs share — the server when Go is the client, the client when Go
// is the server — except where that peer prints no row (the read/atomic
// latency server): then from the end under comparison. env is the
// environment of the end under comparison (Go's or C's).
func benchPerftestRun(t *testing.T, r perftestBenchRow, goEnd, goIsServer bool, env []string) float64 {
	t.Helper()
	args := []string{"-n", strconv.Itoa(r.iters)}
	if !strings.HasPrefix(r.tool, "ib_atomic") {
		args = append(args, "-s", strconv.Itoa(r.size))
	}
	// RXEVM_BENCH_PERFTEST_FLAGS adds flags to both ends of every pair:
	// "-e" (completion events) for the one-vCPU icount mode, where a
	// polling end starves rxe's kernel work until the next timer tick.
	args = append(args, strings.Fields(os.Getenv("RXEVM_BENCH_PERFTEST_FLAGS"))...)
	srv := perftestEnd{goTool: goEnd && goIsServer}
	cli := perftestEnd{goTool: goEnd && !goIsServer}
	if goIsServer {
		srv.env = env
	} else {
		cli.env = env
	}
	var so, co string
	for try := 1; ; try++ {
		var err error
		if so, co, err = tryPerftestPair(t, srv, cli, r.tool, nil, args...); err == nil {
			break
		}
		// rxe fails a run now and then, C against C too (seen: ib_send_bw
		// 64 KiB, LOC_QP_OP_ERR at the server): counted and run again.
		var why []string
		for _, l := range strings.Split(err.Error(), "\n") {
			if strings.Contains(l, "rror") || strings.Contains(l, "Failed") || strings.Contains(l, "status") || strings.Contains(l, "no completion") {
				why = append(why, strings.TrimSpace(l))
			}
		}
		t.Logf("FAILED RUN (go=%v, go is server=%v, try %d): %s", goEnd, goIsServer, try, strings.Join(why, " | "))
		if try == 3 {
			return math.NaN()
		}
	}
	// own is the output of the end under comparison, out its C peer's.
	own, out := co, so
	if goIsServer {
		own, out = so, co
	}
	if strings.Contains(own, "cannot be preloaded") {
		t.Fatalf("%s: the end under comparison ran without its LD_PRELOAD (%v):\n%s", r.tool, env, own)
	} else if i := strings.Index(own, "libppollwait:"); i >= 0 {
		t.Logf("%s %d (server %v): %s", r.tool, r.size, goIsServer, strings.SplitN(own[i:], "\n", 2)[0])
	}
	if r.lat && !goIsServer && (r.tool == "ib_read_lat" || r.tool == "ib_atomic_lat") {
		out = co
	}
	f := checkRow(t, r.tool, out, r.lat, r.size, 0)
	if r.lat {
		return f[2] // t_typical
	}
	return f[1] // BW average
}

// TestPerftestBench compares the Go perftest with Debian's C perftest,
// each row at 64 B, 4 KiB and 64 KiB (atomics: 8 B), in one boot:
// benchRounds rounds, and in each the Go and the C end take turns (the order
// alternating between rounds) against the same C peer — Go client and C
// client each against a C server (end=client), and Go server and C server
// each against a C client (end=server). It prints the medians as a
// table and one PERFTEST-RATIO line per row. Only with RXEVM_BENCH=1
// (make bench-perftest, make bench-vm).
func TestPerftestBench(t *testing.T) {
	if os.Getenv("RXEVM_BENCH") != "1" {
		t.Skip("benchmark: runs with RXEVM_BENCH=1 (make bench-perftest)")
	}
	if why := benchNoPolling(); why != "" && !slices.Contains(strings.Fields(os.Getenv("RXEVM_BENCH_PERFTEST_FLAGS")), "-e") {
		t.Skip("perftest polls without RXEVM_BENCH_PERFTEST_FLAGS=-e: " + why)
	}
	rounds := benchRounds()
	rows := perftestBenchRows()
	note := "" // what the table leaves out, under it
	if slices.Contains(strings.Fields(os.Getenv("RXEVM_BENCH_PERFTEST_FLAGS")), "-e") {
		// perftest refuses -e on WRITE (both tools: "Events feature not
		// available on WRITE verb"); those rows only poll.
		rows = slices.DeleteFunc(rows, func(r perftestBenchRow) bool { return strings.HasPrefix(r.tool, "ib_write_") })
		t.Log("ib_write_bw and ib_write_lat skipped: perftest has no -e for WRITE")
		if kernelAtLeast(t, 6, 12) {
			// 6.12's rxe leaves ib_send_lat -e without a completion
			// event for 30 s, C against C as well: nothing to compare.
			rows = slices.DeleteFunc(rows, func(r perftestBenchRow) bool { return r.tool == "ib_send_lat" })
			note = "\nib_send_lat is left out: with -e it stalls on this kernel, C against C too.\n"
			t.Log("ib_send_lat skipped: with -e it stalls on 6.12, C against C too")
		}
	}
	all := len(rows)
	// RXEVM_BENCH_GOENV="K=V ..." adds a third contender to every pair:
	// the Go end again with that environment (e.g. GOMAXPROCS=1), so that
	// a runtime setting is judged in the same boot as the plain Go end.
	// RXEVM_BENCH_CENV makes the third the C end with that environment
	// (e.g. LD_PRELOAD of a C peer that gives it the Go end's wait).
	alt, err := perftestBenchAlt()
	if err != nil {
		t.Fatal(err)
	}
	if expr := os.Getenv("RXEVM_BENCHROWS"); expr != "" {
		// A subset for an experiment: rows whose "tool/size" matches.
		re := regexp.MustCompile(expr)
		rows = slices.DeleteFunc(rows, func(r perftestBenchRow) bool { return !re.MatchString(fmt.Sprintf("%s/%d", r.tool, r.size)) })
	}
	cells := make([][2]benchCell, len(rows))
	start := time.Now()
	for round := range rounds {
		for i, r := range rows {
			for side, goIsServer := range []bool{false, true} {
				c := &cells[i][side]
				runGo := func() { c.goV = append(c.goV, benchPerftestRun(t, r, true, goIsServer, nil)) }
				runC := func() { c.cV = append(c.cV, benchPerftestRun(t, r, false, goIsServer, nil)) }
				runAlt := func() {
					if alt.env != nil {
						c.altV = append(c.altV, benchPerftestRun(t, r, alt.goEnd, goIsServer, alt.env))
					}
				}
				if round%2 == 0 {
					runGo()
					runC()
					runAlt()
				} else {
					runAlt()
					runC()
					runGo()
				}
			}
		}
		t.Logf("round %d of %d done after %v", round+1, rounds, time.Since(start).Round(time.Second))
		// The medians so far, in case the run is cut short.
		table, lines := perftestBenchTable(rows, cells, round+1, alt)
		if round+1 < rounds {
			t.Logf("after %d rounds:\n%s%s", round+1, table, lines)
		} else {
			t.Logf("Go perftest vs C perftest (TCG VM, one boot):\n%s", table)
			fmt.Print(lines)
			if len(rows) < all {
				t.Log("a subset of the rows (RXEVM_BENCHROWS): no Markdown table for the README")
			} else if err := benchMarkdown("perftest", table+note); err != nil {
				t.Error(err)
			}
		}
	}
}

// perftestBenchTable formats the medians of the rounds so far as a table
// and as PERFTEST-RATIO lines.
func perftestBenchTable(rows []perftestBenchRow, cells [][2]benchCell, rounds int, alt benchAlt) (string, string) {
	var table, lines strings.Builder
	fmt.Fprintf(&table, "| test | Go end | size | metric | Go (median of %d) | C (median) | Go/C [95 %% interval] | Go rounds | C rounds |\n|---|---|---|---|---|---|---|---|---|\n", rounds)
	for i, r := range rows {
		for side, role := range []string{"client", "server"} {
			c := cells[i][side]
			g, cm := medianFinite(c.goV), medianFinite(c.cV)
			metric, unit := "bw", "MB/sec"
			if r.lat {
				metric, unit = "lat", "usec"
			}
			fmt.Fprintf(&table, "| %s | %s | %d | %s %s | %.2f | %.2f | %s | %v | %v |\n", r.tool, role, r.size, metric, unit, g, cm, benchRatio(c.goV, c.cV), c.goV, c.cV)
			fmt.Fprint(&lines, perftestRatioLine(r.tool, r.size, metric, g, cm, role, benchRatioFields(c.goV, c.cV)))
		}
	}
	if alt.env != nil {
		who := "C"
		if alt.goEnd {
			who = "Go"
		}
		fmt.Fprintf(&table, "\n%s with %s, same rounds:\n| test | Go end | size | %[1]s+env (median) | C (median) | %[1]s+env/C [95 %% interval] | %[1]s+env/Go [95 %% interval] | %[1]s+env rounds |\n|---|---|---|---|---|---|---|---|\n", who, strings.Join(alt.env, " "))
		for i, r := range rows {
			for side, role := range []string{"client", "server"} {
				c := cells[i][side]
				a, cm := medianFinite(c.altV), medianFinite(c.cV)
				fmt.Fprintf(&table, "| %s | %s | %d | %.2f | %.2f | %s | %s | %v |\n", r.tool, role, r.size, a, cm, benchRatio(c.altV, c.cV), benchRatio(c.altV, c.goV), c.altV)
			}
		}
	}
	return table.String(), lines.String()
}

// perftestRatioLine is one PERFTEST-RATIO line: the exact form,
// test=<name> the bare test name, then the end Go played (client or
// server) and the ratio's 95 % interval (benchRatioFields) as extra
// fields after ratio=.
func perftestRatioLine(tool string, size int, metric string, goV, cV float64, end, interval string) string {
	return fmt.Sprintf("PERFTEST-RATIO test=%s size=%d metric=%s go=%.2f c=%.2f ratio=%.3f end=%s %s\n", tool, size, metric, goV, cV, goV/cV, end, interval)
}

// benchCell holds one row's figures, Go's and C's (and the third
// contender's, benchAlt), round by round.
type benchCell struct{ goV, cV, altV []float64 }

// benchAlt is the perftest bench's third contender, if env is not nil: the
// Go end (goEnd) or the C end with env added.
type benchAlt struct {
	goEnd bool
	env   []string
}

// perftestBenchAlt reads the third contender from RXEVM_BENCH_GOENV or
// RXEVM_BENCH_CENV ("K=V ...").
func perftestBenchAlt() (benchAlt, error) {
	goEnv, cEnv := os.Getenv("RXEVM_BENCH_GOENV"), os.Getenv("RXEVM_BENCH_CENV")
	switch {
	case goEnv != "" && cEnv != "":
		return benchAlt{}, fmt.Errorf("RXEVM_BENCH_GOENV and RXEVM_BENCH_CENV both set: the bench has one third contender")
	case goEnv != "":
		return benchAlt{goEnd: true, env: strings.Fields(goEnv)}, nil
	case cEnv != "":
		return benchAlt{env: strings.Fields(cEnv)}, nil
	}
	return benchAlt{}, nil
}

// TestPerftestProfile runs the Go perftest client of a few rows with a CPU
// profile (PERFTEST_CPUPROFILE) and prints it base64-encoded between
// markers, for go tool pprof on the host; and each of the Go and the C
// client once under strace -c, for their system call counts. Only with
// RXEVM_BENCH=1 and RXEVM_PROFILE=1.
func TestPerftestProfile(t *testing.T) {
	if os.Getenv("RXEVM_BENCH") != "1" || os.Getenv("RXEVM_PROFILE") != "1" {
		t.Skip("profile: runs with RXEVM_BENCH=1 RXEVM_PROFILE=1")
	}
	for _, r := range []perftestBenchRow{{"ib_send_bw", 64, 5000, false}, {"ib_send_lat", 64, 500, true}, {"ib_write_bw", 4096, 1000, false}} {
		args := []string{"-n", strconv.Itoa(r.iters), "-s", strconv.Itoa(r.size)}
		for _, goIsServer := range []bool{false, true} {
			if goIsServer && r.tool == "ib_write_bw" {
				continue // the half-duplex server only waits: no measured loop
			}
			prof := fmt.Sprintf("/tmp/%s-%v.prof", r.tool, goIsServer)
			e := perftestEnd{goTool: true, env: []string{"PERFTEST_CPUPROFILE=" + prof}}
			c := perftestEnd{}
			srv, cli := c, e
			if goIsServer {
				srv, cli = e, c
			}
			so, co := runPerftestPair(t, srv, cli, r.tool, args...)
			b, err := os.ReadFile(prof)
			if err != nil {
				t.Fatalf("%v\n%s\n%s", err, so, co)
			}
			t.Logf("PROFILE-BEGIN %s server=%v\n%s\nPROFILE-END", r.tool, goIsServer, base64.StdEncoding.EncodeToString(b))
		}
		for _, goTool := range []bool{true, false} {
			straced := perftestEnd{goTool: goTool, strace: true}
			_, co := runPerftestPair(t, perftestEnd{}, straced, r.tool, args...)
			t.Logf("%s client (go=%v) under strace -c:\n%s", r.tool, goTool, co)
		}
	}
}

// medianFinite is the median of the runs that produced a figure (a run
// that failed three times counts as NaN), NaN if none did.
func medianFinite(xs []float64) float64 {
	var ok []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		return math.NaN()
	}
	return median(ok)
}

// The PERFTEST-RATIO lines parse as the issue spells them, test=<name>
// being the bare test name for both ends Go plays (seen failing with the
// server rows' old test=<name>:server).
func TestPerftestRatioLine(t *testing.T) {
	form := regexp.MustCompile(`^PERFTEST-RATIO test=(ib_(?:send|write|read|atomic)_(?:bw|lat)) size=(\d+) metric=(bw|lat) go=([\d.]+) c=([\d.]+) ratio=([\d.]+)(?: end=(client|server))? lo=([\d.]+|NaN) hi=([\d.]+|NaN)\n$`)
	for _, end := range []string{"client", "server"} {
		l := perftestRatioLine("ib_send_bw", 4096, "bw", 812.5, 800, end, benchRatioFields([]float64{812.5, 812.5}, []float64{800, 800}))
		m := form.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("%q does not parse", l)
		}
		if m[1] != "ib_send_bw" || m[2] != "4096" || m[3] != "bw" || m[6] != "1.016" || m[7] != end || m[8] != "1.016" || m[9] != "1.016" {
			t.Fatalf("%q parsed as %q", l, m[1:])
		}
	}
}

// TestPerftestRuntimeWakeups measures what the Go client's runtime adds
// on the client's vCPU, and what that costs a C client: ib_send_bw at
// 64 B, 20 000 messages, server pinned to vCPU 0 and client to vCPU 1,
// five rounds of three contenders taking turns — the C client; the C
// client while a thread of this test, pinned to the same vCPU, wakes
// every 5 ms (about how often the Go client's monitor thread woke in the
// loop, measured per thread); the Go client. It logs the medians of the
// C server's BW average and of the client's context switches and system
// time (getrusage of the whole process), and the CPU time ksoftirqd/1
// took meanwhile (rxe's packets are processed there when softirqs pile
// up). Only with RXEVM_BENCH=1 and RXEVM_PROFILE=1.
func TestPerftestRuntimeWakeups(t *testing.T) {
	if os.Getenv("RXEVM_BENCH") != "1" || os.Getenv("RXEVM_PROFILE") != "1" {
		t.Skip("profile: runs with RXEVM_BENCH=1 RXEVM_PROFILE=1")
	}
	const (
		rounds = 5
		period = 5 * time.Millisecond
		msgs   = 20000
	)
	contenders := []struct {
		name   string
		goTool bool
		waker  bool
	}{
		{"C client", false, false},
		{fmt.Sprintf("C client, woken every %v", period), false, true},
		{"Go client", true, false},
	}
	type figures struct{ bw, switches, stime, wakes, ksoft []float64 }
	res := make([]figures, len(contenders))
	args := []string{"-n", strconv.Itoa(msgs), "-s", "64"}
	for round := range rounds {
		order := []int{0, 1, 2}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			c := contenders[i]
			var ru syscall.Rusage
			srv := perftestEnd{pin: true, cpu: 0}
			cli := perftestEnd{goTool: c.goTool, pin: true, cpu: 1, usage: &ru}
			var stop func() int
			if c.waker {
				stop = wakeOnCPU(t, 1, period)
			}
			k0 := ksoftirqdTime(t)
			so, _ := runPerftestPair(t, srv, cli, "ib_send_bw", args...)
			k1 := ksoftirqdTime(t)
			if stop != nil {
				res[i].wakes = append(res[i].wakes, float64(stop()))
			}
			f := checkRow(t, "ib_send_bw", so, false, 64, msgs)
			res[i].bw = append(res[i].bw, f[1])
			res[i].ksoft = append(res[i].ksoft, float64(k1[1]-k0[1]))
			t.Logf("%s: %.2f MB/sec, ksoftirqd/0 %d ms, ksoftirqd/1 %d ms, client switches %d, system %d ms", c.name, f[1], k1[0]-k0[0], k1[1]-k0[1], ru.Nvcsw+ru.Nivcsw, ru.Stime.Sec*1000+ru.Stime.Usec/1000)
			res[i].switches = append(res[i].switches, float64(ru.Nvcsw+ru.Nivcsw))
			res[i].stime = append(res[i].stime, float64(ru.Stime.Sec*1000+ru.Stime.Usec/1000))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| client | BW average MB/sec (median of %d) | / C | context switches | system ms | ksoftirqd/1 ms | waker wake-ups | BW runs |\n|---|---|---|---|---|---|---|---|\n", rounds)
	for i, c := range contenders {
		r := res[i]
		wakes := "-"
		if r.wakes != nil {
			wakes = fmt.Sprint(median(r.wakes))
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.0f | %.0f | %.0f | %s | %v |\n", c.name, median(r.bw), median(r.bw)/median(res[0].bw), median(r.switches), median(r.stime), median(r.ksoft), wakes, r.bw)
	}
	t.Logf("ib_send_bw 64 B, %d messages, server on vCPU 0, client on vCPU 1:\n%s", msgs, b.String())
}

// wakeOnCPU starts a thread pinned to cpu that sleeps for period and
// wakes, over and over, until the returned stop, which says how many
// times it woke.
func wakeOnCPU(t *testing.T, cpu int, period time.Duration) (stop func() int) {
	t.Helper()
	var quit atomic.Bool
	woke := make(chan int, 1)
	ready := make(chan error, 1)
	go func() {
		if err := pinThread(cpu); err != nil {
			ready <- err
			woke <- 0
			return
		}
		ready <- nil
		n := 0
		ts := unix.NsecToTimespec(int64(period))
		for !quit.Load() {
			unix.Nanosleep(&ts, nil)
			n++
		}
		woke <- n
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	return func() int {
		quit.Store(true)
		return <-woke
	}
}

// ksoftirqdTime is the CPU time, in ms, ksoftirqd/0 and ksoftirqd/1 have
// used so far.
func ksoftirqdTime(t *testing.T) [2]int64 {
	t.Helper()
	var out [2]int64
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		var cpu int
		if _, err := fmt.Sscanf(strings.TrimSpace(string(comm)), "ksoftirqd/%d", &cpu); err != nil || cpu > 1 {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[cpu] = (ut + st) * 10 // USER_HZ 100
	}
	return out
}

// benchRounds is how many interleaved rounds the Go-vs-C benchmarks run:
// RXEVM_BENCH_ROUNDS, default 5. Single runs under TCG are bimodal (see
// TestPerftestRuntimeWakeups), so more rounds narrow the medians.
func benchRounds() int {
	if n, err := strconv.Atoi(os.Getenv("RXEVM_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 5
}
