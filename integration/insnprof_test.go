//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Lines for the instruction profiler's reader (integration/internal/insnprof):
// what it needs to name the guest addresses QEMU's insnprof plugin counted.
const (
	insnprofRun  = "insnprof-run"  // label role pid iterations
	insnprofMap  = "insnprof-map"  // pid, then a /proc/PID/maps line (executable mappings)
	insnprofKsym = "insnprof-ksym" // a text symbol's /proc/kallsyms line
	insnprofSum  = "insnprof-sum"  // a guest file's path and SHA-256
	insnprofIdle = "insnprof-idle" // microseconds the CPUs were idle while the pair ran
)

// TestInsnProfile runs one perftest pair with -e, C's server and the
// client RXEVM_INSNPROF_CLIENT names (c, the default, or go), the tool
// RXEVM_INSNPROF names with RXEVM_INSNPROF_ITERS iterations (default
// 20000) of RXEVM_INSNPROF_SIZE bytes (64). It prints what reading the
// boot's QEMU instruction profile (RXEVM_PLUGIN with insnprof.so) takes:
// both ends' executable mappings, and the kernel's text symbols where this
// boot put them (Debian's System.map is a stub, and KASLR moves the text).
// One pair per boot: what a boot counted beyond another boot with fewer
// iterations is what those iterations cost. make profile-insn runs the
// four boots and the reader.
func TestInsnProfile(t *testing.T) {
	tool := os.Getenv("RXEVM_INSNPROF")
	if tool == "" {
		t.Skip("instruction profile: runs with RXEVM_INSNPROF=<perftest tool> (make profile-insn)")
	}
	iters, size := 20000, 64
	if v, err := strconv.Atoi(os.Getenv("RXEVM_INSNPROF_ITERS")); err == nil && v > 0 {
		iters = v
	}
	if v, err := strconv.Atoi(os.Getenv("RXEVM_INSNPROF_SIZE")); err == nil && v > 0 {
		size = v
	}
	goClient := false
	switch c := os.Getenv("RXEVM_INSNPROF_CLIENT"); c {
	case "", "c":
	case "go":
		goClient = true
	default:
		t.Fatalf("RXEVM_INSNPROF_CLIENT=%q: want c or go", c)
	}
	printKernelSymbols(t)
	if goClient {
		// The reader checks that it names the Go tool's addresses
		// with this very build.
		b, err := os.ReadFile(goPerftest)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%s %s %x\n", insnprofSum, goPerftest, sha256.Sum256(b))
	}

	devs := devices(t, 2)
	idle := idleTime(t)
	const port = 18790
	args := []string{"-n", strconv.Itoa(iters), "-s", strconv.Itoa(size), "-e"}
	s := startPerftest(t, perftestEnd{}, tool, devs[0], port, args, "")
	waitListening(t, s, port, 30*time.Second)
	c := startPerftest(t, perftestEnd{goTool: goClient}, tool, devs[1], port, args, "10.99.0.1")
	label := "c"
	if goClient {
		label = "go"
	}
	for _, e := range []struct {
		role string
		p    *peer
	}{{"server", s}, {"client", c}} {
		fmt.Printf("%s %s %s %d %d\n", insnprofRun, label, e.role, e.p.cmd.Process.Pid, iters)
		// The map once the code is in place: the C tools load rxe's
		// provider with dlopen, the Go tool has only to exec. Both do
		// that before they connect, so the watch ends before the loop
		// begins (a watch that read the map over and over would be
		// counted with the loop).
		whole := "librxe-"
		if goClient && e.role == "client" {
			whole = goPerftest
		}
		go printMaps(e.p, whole, "[vdso]")
	}
	waitPair(s, c)
	if s.err != nil || c.err != nil {
		t.Fatalf("%s: server %v, client %v\n--- server\n%s\n--- client\n%s", tool, s.err, c.err, s.out.String(), c.out.String())
	}
	// Time the CPU spent idle is time no instruction counts: under
	// -icount (sleep=off) the clock jumps to the next timer instead.
	fmt.Printf("%s %d\n", insnprofIdle, (idleTime(t) - idle).Microseconds())
	t.Logf("%s %d B x %d, %s client:\n%s", tool, size, iters, label, c.out.String())
}

// printMaps prints p's executable mappings once they name every one of
// whole (exec builds the map in steps that a reader can see), or nothing
// if p exits first.
func printMaps(p *peer, whole ...string) {
	path := fmt.Sprintf("/proc/%d/maps", p.cmd.Process.Pid)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return // it exited; the reader says that the pid has no map
		}
		if !slices.ContainsFunc(whole, func(w string) bool { return !bytes.Contains(b, []byte(w)) }) {
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) > 1 && strings.Contains(f[1], "x") {
					fmt.Printf("%s %d %s\n", insnprofMap, p.cmd.Process.Pid, sc.Text())
				}
			}
			return
		}
		select {
		case <-p.done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// idleTime is how long the guest's CPUs have been idle, from /proc/stat
// (in USER_HZ ticks: 10 ms).
func idleTime(t *testing.T) time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	// cpu  user nice system idle iowait ...
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		t.Fatalf("/proc/stat: %q", line)
	}
	ticks, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		t.Fatalf("/proc/stat: %q", line)
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// printKernelSymbols prints the kernel's text symbols, the modules' too.
func printKernelSymbols(t *testing.T) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 3 && (fs[1] == "t" || fs[1] == "T") && fs[0] != strings.Repeat("0", len(fs[0])) {
			fmt.Printf("%s %s\n", insnprofKsym, sc.Text())
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("/proc/kallsyms shows no addresses (kptr_restrict?)")
	}
}
