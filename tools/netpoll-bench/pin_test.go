//go:build linux

package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// processor is the CPU the calling thread last ran on (field 39 of
// /proc/thread-self/stat).
func processor(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // from field 3 on
	n, err := strconv.Atoi(fields[39-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pinThread binds the goroutine's thread to the one CPU: the thread may run
// nowhere else, and does run there while it spins.
func TestPinThread(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	for cpu := range runtime.NumCPU() {
		if !allowed.IsSet(cpu) {
			continue
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := pinThread(cpu); err != nil {
				t.Error(err)
				return
			}
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &set); err != nil {
				t.Error(err)
				return
			}
			if set.Count() != 1 || !set.IsSet(cpu) {
				t.Errorf("thread affinity has %d CPUs, want only CPU %d", set.Count(), cpu)
			}
			for range 1000 {
				runtime.Gosched()
				if got := processor(t); got != cpu {
					t.Errorf("pinned to CPU %d, ran on CPU %d", cpu, got)
					return
				}
			}
		}()
		<-done
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil || after != allowed {
		t.Errorf("the test goroutine's own affinity changed: %d CPUs, %v", after.Count(), err)
	}
}

func TestParsePinning(t *testing.T) {
	if p, err := parsePinning(""); p != nil || err != nil {
		t.Errorf(`parsePinning(""): %v, %v; want no pinning`, p, err)
	}
	for _, bad := range []string{"0", "0,0", "a,1", "0,1,2", "-1,0", "0,100000"} {
		if _, err := parsePinning(bad); err == nil {
			t.Errorf("parsePinning(%q) accepted", bad)
		}
	}
	if runtime.NumCPU() >= 2 {
		if p, err := parsePinning("1,0"); err != nil || p.server != 1 || p.client != 0 {
			t.Errorf(`parsePinning("1,0"): %+v, %v`, p, err)
		}
	}
}
