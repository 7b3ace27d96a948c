//go:build integration

package integration

import (
	"bufio"
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tracefs is where the guest's kernel tracer lives once mounted.
const tracefs = "/sys/kernel/tracing"

// traceLine is one line of tracefs's trace file with the tgid recorded:
// task-tid (tgid) [cpu] flags timestamp: event: fields. With the x86-tsc
// clock the timestamp is raw TSC ticks, which under QEMU's -icount count
// guest instructions.
var traceLine = regexp.MustCompile(`^\s*(.+)-(\d+)\s+\(\s*(\d+|-+)\)\s+\[\d+\]\s+\S+\s+(\d+):\s+(\w+):\s+(.*)$`)

var (
	traceSwitchNext = regexp.MustCompile(`==> next_comm=(.+) next_pid=(\d+)`)
	traceSysNR      = regexp.MustCompile(`^NR (-?\d+)`)
	traceTimerFn    = regexp.MustCompile(`function=(\S+)`)
)

// syscallNames names the x86-64 system calls the pingpongs and the Go
// runtime make in their loops; others print as their number.
var syscallNames = map[int]string{
	0: "read", 1: "write", 7: "poll", 13: "rt_sigaction", 14: "rt_sigprocmask", 15: "rt_sigreturn",
	16: "ioctl", 23: "select", 24: "sched_yield", 35: "nanosleep", 39: "getpid", 186: "gettid",
	202: "futex", 228: "clock_gettime", 230: "clock_nanosleep", 232: "epoll_wait", 234: "tgkill",
	270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 290: "eventfd2", 441: "epoll_pwait2",
}

// cpuAccount is where one trace's CPU time went, in TSC ticks: per
// process (by tgid; 0 for the idle task), user and kernel time of its
// threads, system calls by name (count and ticks spent on the CPU
// inside them), threads switched in, and per thread the ticks on the CPU.
type cpuAccount struct {
	comm     map[int]string
	user     map[int]int64
	kernel   map[int]int64
	calls    map[int]map[string]int
	callTime map[int]map[string]int64
	switches map[int]int
	faults   map[int]int // user page faults
	// idleBy is the CPU's idle stretches (under 50 M ticks: not a test's
	// own waits) by what ended them: the timer callback that expired
	// first, else the first event and its task.
	idleBy  map[string]int64
	idleEnd map[string]int
	// preempted counts a process's switches out while still runnable
	// (prev_state R), preempted by the task it woke: the scheduler skips
	// its clock update at that switch (rq_clock_skip_update), so rusage
	// charges the rest of the run up to it to the woken task.
	preempted map[int]int
	thread    map[int]map[int]int64 // tgid -> tid -> ticks
	tgid      map[int]int
}

func newCPUAccount() *cpuAccount {
	return &cpuAccount{comm: map[int]string{}, user: map[int]int64{}, kernel: map[int]int64{},
		calls: map[int]map[string]int{}, callTime: map[int]map[string]int64{}, switches: map[int]int{},
		faults: map[int]int{}, idleBy: map[string]int64{}, idleEnd: map[string]int{}, preempted: map[int]int{},
		thread: map[int]map[int]int64{}, tgid: map[int]int{}}
}

// parseTrace accounts every tick between two events to the task running
// then: to its kernel time while it is inside a system call (or is a
// kernel thread), else to its user time. Interrupts and softirqs count for
// the task they interrupted, and a user page fault (counted per process)
// for its user time: the tracer records its entry only.
func parseTrace(path string) (*cpuAccount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := newCPUAccount()
	inCall := map[int]string{} // tid -> the call it is in
	callStart := map[int]int64{}
	cur, last := -1, int64(-1)
	idleSince := int64(-1)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tid, _ := strconv.Atoi(m[2])
		ts, _ := strconv.ParseInt(m[4], 10, 64)
		if tg, err := strconv.Atoi(m[3]); err == nil {
			a.tgid[tid] = tg
		} else if tid == 0 {
			a.tgid[0] = 0
		}
		if _, ok := a.tgid[tid]; !ok {
			a.tgid[tid] = tid
		}
		tg := a.tgid[tid]
		if _, ok := a.comm[tg]; !ok || tid == tg {
			a.comm[tg] = m[1]
		}
		if cur == tid && last >= 0 {
			d := ts - last
			if a.thread[tg] == nil {
				a.thread[tg] = map[int]int64{}
			}
			a.thread[tg][tid] += d
			if call, ok := inCall[tid]; ok || tg == 0 || strings.HasPrefix(m[1], "kworker") || strings.HasPrefix(m[1], "ksoftirqd") {
				a.kernel[tg] += d
				if ok {
					a.callTime[tg][call] += d
				}
			} else {
				a.user[tg] += d
			}
		}
		if idleSince >= 0 {
			if d := ts - idleSince; d < 5e7 {
				key := m[5] + " " + m[1]
				if f := traceTimerFn.FindStringSubmatch(m[6]); f != nil {
					key = "timer " + f[1]
				}
				a.idleBy[key] += d
				a.idleEnd[key]++
			}
			idleSince = -1
		}
		cur, last = tid, ts
		switch m[5] {
		case "sys_enter":
			if n := traceSysNR.FindStringSubmatch(m[6]); n != nil {
				nr, _ := strconv.Atoi(n[1])
				name, ok := syscallNames[nr]
				if !ok {
					name = "nr" + n[1]
				}
				inCall[tid] = name
				callStart[tid] = ts
				if a.calls[tg] == nil {
					a.calls[tg], a.callTime[tg] = map[string]int{}, map[string]int64{}
				}
				a.calls[tg][name]++
			}
		case "sys_exit":
			delete(inCall, tid)
		case "page_fault_user":
			a.faults[tg]++
		case "sched_switch":
			if strings.Contains(m[6], "prev_state=R") {
				a.preempted[tg]++
			}
			if n := traceSwitchNext.FindStringSubmatch(m[6]); n != nil {
				cur, _ = strconv.Atoi(n[2])
				if cur == 0 {
					idleSince = ts
				}
				if _, ok := a.tgid[cur]; ok {
					a.switches[a.tgid[cur]]++
				} else {
					a.switches[cur]++
				}
			}
		}
	}
	return a, sc.Err()
}

// traceRun enables the scheduler and system call events with the x86-tsc
// clock, runs fn, and returns the account of the trace.
func traceRun(t *testing.T, fn func()) *cpuAccount {
	t.Helper()
	if _, err := os.Stat(filepath.Join(tracefs, "trace")); err != nil {
		if err := unix.Mount("nodev", tracefs, "tracefs", 0, ""); err != nil {
			t.Skipf("no tracefs: %v", err)
		}
	}
	w := func(file, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tracefs, file), []byte(v), 0); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	w("tracing_on", "0")
	w("trace_clock", "x86-tsc")
	w("buffer_size_kb", "65536")
	w("options/record-tgid", "1")
	w("set_event", "raw_syscalls:sys_enter raw_syscalls:sys_exit sched:sched_switch exceptions:page_fault_user timer:hrtimer_expire_entry timer:timer_expire_entry")
	w("trace", "")
	w("tracing_on", "1")
	fn()
	w("tracing_on", "0")
	out := filepath.Join(t.TempDir(), "trace")
	b, err := os.ReadFile(filepath.Join(tracefs, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	w("set_event", "")
	w("trace", "")
	if strings.Contains(string(b[:min(len(b), 4096)]), "LOST") {
		t.Logf("the trace lost events: enlarge buffer_size_kb")
	}
	a, err := parseTrace(out)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEventTraceAccount is the per-iteration instruction account of the
// rc-pingpong events rows (-e), C against Go, for both ends: each pair
// runs under the kernel's tracer (system call entries and exits, context
// switches) twice, with n and 2n iterations, and the difference divided
// by n is what one iteration costs — set-up and exit cancel out. Under
// QEMU's -icount (RXEVM_ICOUNT, one vCPU) the tracer's x86-tsc clock
// counts guest instructions, so the log is where each end's instructions
// go: user and kernel time per process, system calls by name with their
// count and in-kernel ticks, context switches and the runtime's threads,
// the kernel's own threads (rxe's work on 6.12 runs in kworkers), what
// ended the CPU's idle stretches; and per process its set-up and exit
// (what the n run spent beyond n iterations) with its page faults, and
// its rusage CPU time next to the traced ticks. The tracer adds its own
// cost to every event it records (both tools alike per event). RXEVM_TRACE_GOENV="K=V ..." adds a Go pair with that
// environment; RXEVM_TRACE_PERFTEST=<tool> (ib_send_lat, ib_read_lat)
// traces that perftest tool with -e instead, C against C and the Go
// client against C's server, and with RXEVM_TRACE_CENV="K=V ..." the C
// client with that environment too. Only with RXEVM_BENCH=1 and
// RXEVM_PROFILE=1.
func TestEventTraceAccount(t *testing.T) {
	if os.Getenv("RXEVM_BENCH") != "1" || os.Getenv("RXEVM_PROFILE") != "1" {
		t.Skip("profile: runs with RXEVM_BENCH=1 RXEVM_PROFILE=1")
	}
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("RXEVM_TRACE_ITERS")); err == nil && v > 0 {
		n = v
	}
	type contender struct {
		name, env string
		run       tracedPair
	}
	cs := []contender{{"C", "", pingpongPair(cPingpong)}, {"Go", "", pingpongPair(goPingpong)}}
	if e := os.Getenv("RXEVM_TRACE_GOENV"); e != "" {
		cs = append(cs, contender{"Go " + e, e, pingpongPair(goPingpong)})
	}
	if tool := os.Getenv("RXEVM_TRACE_PERFTEST"); tool != "" {
		// The bench's client rows: C against C, the Go client against
		// the C server.
		cs = []contender{{"C " + tool, "", perftestPair(tool, false, nil)}, {"Go client " + tool, "", perftestPair(tool, true, nil)}}
		if e := os.Getenv("RXEVM_TRACE_CENV"); e != "" {
			// The C client with this environment: e.g. LD_PRELOAD of
			// libppollwait, C with the Go client's completion wait.
			cs = append(cs, contender{"C client with " + e + " " + tool, "", perftestPair(tool, false, strings.Fields(e))})
		}
	}
	sizes := []int{64, 4096}
	if s := os.Getenv("RXEVM_TRACE_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Fields(s) {
			v, _ := strconv.Atoi(f)
			sizes = append(sizes, v)
		}
	}
	port := 18800
	for _, size := range sizes {
		for _, c := range cs {
			var acc [2]*cpuAccount
			var pids [2][2]int // [run][server, client]
			var result [2]string
			var rusage [2][2]time.Duration // [run][server, client] CPU time
			for k, iters := range []int{n, 2 * n} {
				port++
				for _, kv := range strings.Fields(c.env) {
					k, v, _ := strings.Cut(kv, "=")
					t.Setenv(k, v)
				}
				acc[k] = traceRun(t, func() {
					var sp, cp *peer
					sp, cp, result[k] = c.run(t, size, iters, port)
					pids[k] = [2]int{sp.cmd.Process.Pid, cp.cmd.Process.Pid}
					rusage[k] = [2]time.Duration{cpuTime(sp), cpuTime(cp)}
				})
				for _, kv := range strings.Fields(c.env) {
					k, _, _ := strings.Cut(kv, "=")
					os.Unsetenv(k)
				}
			}
			// rusage's CPU time (what make bench-vm's CPU column adds up)
			// next to the traced ticks of the same processes.
			t.Logf("%d B -e, %s pair, client: %s (n=%d), %s (2n); rusage CPU server %v %v, client %v %v:\n%s", size, c.name,
				result[0], n, result[1], rusage[0][0], rusage[1][0], rusage[0][1], rusage[1][1], accountDiff(acc, pids, n))
		}
	}
}

// tracedPair runs one pair to its end with completion events, size bytes
// and iters iterations on port, and returns its ends and the client's
// result.
type tracedPair func(t *testing.T, size, iters, port int) (srv, cli *peer, result string)

// pingpongPair is a pair of bin, rc-pingpong or ibv_rc_pingpong, both
// ends with -e; its result is the client's usec/iter.
func pingpongPair(bin string) tracedPair {
	return func(t *testing.T, size, iters, port int) (*peer, *peer, string) {
		r := pingpongRun{server: bin, client: bin, size: size, iters: iters, port: port, serverEvents: true, clientEvents: true}
		sp, cp := r.start(t, 5*time.Minute)
		co := cp.wait(t)
		r.checkPair(t, sp.wait(t), co)
		if m := pingpongIters.FindStringSubmatch(co); m != nil {
			return sp, cp, m[3] + " usec/iter"
		}
		return sp, cp, "?"
	}
}

// perftestPair is a pair of the perftest tool with -e, C's server and
// the Go client or C's (with cliEnv added to its environment); its result
// is the client's latency row.
func perftestPair(tool string, goClient bool, cliEnv []string) tracedPair {
	return func(t *testing.T, size, iters, port int) (*peer, *peer, string) {
		devs := devices(t, 2)
		args := []string{"-n", strconv.Itoa(iters), "-s", strconv.Itoa(size), "-e"}
		s := startPerftest(t, perftestEnd{}, tool, devs[0], port, args, "")
		waitListening(t, s, port, 30*time.Second)
		c := startPerftest(t, perftestEnd{goTool: goClient, env: cliEnv}, tool, devs[1], port, args, "10.99.0.1")
		waitPair(s, c)
		if s.err != nil || c.err != nil {
			t.Fatalf("%s: server %v, client %v\n--- server\n%s\n--- client\n%s", tool, s.err, c.err, s.out.String(), c.out.String())
		}
		row := perftestLatRow.FindAllString(c.out.String(), -1)
		if row == nil {
			return s, c, "?"
		}
		return s, c, strings.Join(strings.Fields(row[len(row)-1]), " ")
	}
}

// accountDiff formats (b − a)/n for the server, the client, the kernel's
// threads and the idle task: what one iteration adds.
func accountDiff(acc [2]*cpuAccount, pids [2][2]int, n int) string {
	a, b := acc[0], acc[1]
	per := func(x, y int64) float64 { return float64(y-x) / float64(n) }
	var sb strings.Builder
	role := func(i int) string { return [2]string{"server", "client"}[i] }
	for i := range 2 {
		pa, pb := pids[0][i], pids[1][i]
		fmt.Fprintf(&sb, "  %s %-16s user %7.0f kernel %7.0f total %7.0f ticks/iter; switches in %.2f/iter, out preempted %.2f/iter; threads %d; traced %.2f M then %.2f M ticks in all\n", role(i), b.comm[pb],
			per(a.user[pa], b.user[pb]), per(a.kernel[pa], b.kernel[pb]),
			per(a.user[pa]+a.kernel[pa], b.user[pb]+b.kernel[pb]),
			float64(b.switches[pb]-a.switches[pa])/float64(n), float64(b.preempted[pb]-a.preempted[pa])/float64(n), len(b.thread[pb]),
			float64(a.user[pa]+a.kernel[pa])/1e6, float64(b.user[pb]+b.kernel[pb])/1e6)
		// Set-up and exit, what the n run spent beyond n iterations
		// (2a − b): with few iterations (the bench's 100 at 64 KiB) it
		// is most of a process's CPU time.
		setup := func(x, y int64) float64 { return float64(2*x-y) / 1e6 }
		fmt.Fprintf(&sb, "    set-up and exit: user %.2f M kernel %.2f M ticks; %d page faults (%.2f/iter)", setup(a.user[pa], b.user[pb]), setup(a.kernel[pa], b.kernel[pb]),
			2*a.faults[pa]-b.faults[pb], float64(b.faults[pb]-a.faults[pa])/float64(n))
		names := slices.Collect(maps.Keys(b.calls[pb]))
		slices.SortFunc(names, func(x, y string) int {
			return cmp.Compare(2*a.callTime[pa][y]-b.callTime[pb][y], 2*a.callTime[pa][x]-b.callTime[pb][x])
		})
		for _, name := range names[:min(len(names), 3)] {
			fmt.Fprintf(&sb, "; %s %d calls %.2f M", name, 2*a.calls[pa][name]-b.calls[pb][name], setup(a.callTime[pa][name], b.callTime[pb][name]))
		}
		sb.WriteString("\n")
		slices.SortFunc(names, func(x, y string) int { return cmp.Compare(b.callTime[pb][y], b.callTime[pb][x]) })
		for _, name := range names {
			calls, ticks := float64(b.calls[pb][name]-a.calls[pa][name])/float64(n), per(a.callTime[pa][name], b.callTime[pb][name])
			if calls > -0.005 && calls < 0.005 && ticks > -100 && ticks < 100 {
				continue // set-up's calls, or none
			}
			fmt.Fprintf(&sb, "    %-14s %6.2f calls/iter %7.0f ticks/iter in the kernel (%.0f per call)\n", name,
				calls, ticks,
				float64(b.callTime[pb][name])/float64(max(b.calls[pb][name], 1)))
		}
		// The threads by CPU time, largest first (the Go runtime's).
		ta, tb := sortedThreads(a.thread[pa]), sortedThreads(b.thread[pb])
		for j := range tb {
			var before int64
			if j < len(ta) {
				before = ta[j]
			}
			fmt.Fprintf(&sb, "    thread %d: %.0f ticks/iter (%d then %d in all)\n", j, per(before, tb[j]), before, tb[j])
		}
	}
	// Everything else: kernel threads by name, idle.
	others := func(x *cpuAccount) (m map[string]int64, preempted map[string]int) {
		m, preempted = map[string]int64{}, map[string]int{}
		for tg, comm := range x.comm {
			if slices.Contains(pids[0][:], tg) || slices.Contains(pids[1][:], tg) {
				continue
			}
			key := comm
			if tg == 0 {
				key = "idle"
			} else if i := strings.IndexAny(comm, "/:"); i > 0 {
				key = comm[:i]
			}
			m[key] += x.user[tg] + x.kernel[tg]
			preempted[key] += x.preempted[tg]
		}
		return m, preempted
	}
	// What ended the CPU's idle stretches, and how long they were.
	ends := slices.Collect(maps.Keys(b.idleBy))
	slices.SortFunc(ends, func(x, y string) int { return cmp.Compare(b.idleBy[y]-a.idleBy[y], b.idleBy[x]-a.idleBy[x]) })
	for _, k := range ends {
		if d := per(a.idleBy[k], b.idleBy[k]); d >= 50 || d <= -50 {
			fmt.Fprintf(&sb, "  idle ended by %-32s %7.0f ticks/iter, %.2f times/iter\n", k, d, float64(b.idleEnd[k]-a.idleEnd[k])/float64(n))
		}
	}
	oa, pa := others(a)
	ob, pb := others(b)
	keys := slices.Collect(maps.Keys(ob))
	slices.SortFunc(keys, func(x, y string) int { return cmp.Compare(ob[y]-oa[y], ob[x]-oa[x]) })
	for _, k := range keys {
		if d := per(oa[k], ob[k]); d >= 50 || d <= -50 {
			fmt.Fprintf(&sb, "  other %-16s %7.0f ticks/iter, out preempted %.2f/iter\n", k, d, float64(pb[k]-pa[k])/float64(n))
		}
	}
	return sb.String()
}

// sortedThreads is a process's per-thread ticks, largest first.
func sortedThreads(m map[int]int64) []int64 {
	v := slices.Collect(maps.Values(m))
	slices.SortFunc(v, func(x, y int64) int { return cmp.Compare(y, x) })
	return v
}
