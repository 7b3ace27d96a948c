//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when the tests leave a uverbs fd or a ring mapping
// behind: every test must release what it made (explicitly or, for the
// tests of the GC safety net, through the cleanups), or a leak in the
// library hides behind a passing test.
func TestMain(m *testing.M) {
	code := m.Run()
	if leaks := uverbsLeaks(5 * time.Second); leaks != "" {
		fmt.Fprintf(os.Stderr, "integration: the tests leaked %s\n", leaks)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// uverbsLeaks describes the uverbs fds and mappings the process still holds
// after giving the garbage collector until wait to run dropped objects'
// cleanups; "" when there are none.
func uverbsLeaks(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		runtime.GC()
		fds, maps := uverbsHeld()
		if len(fds)+len(maps) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("%d uverbs fds %v and %d uverbs mappings %v", len(fds), fds, len(maps), maps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// uverbsHeld lists this process's fds that refer to an RDMA device file or
// an RDMA event file, and its mappings of /dev/infiniband files (rxe rings).
func uverbsHeld() (fds, maps []string) {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && (strings.HasPrefix(target, "/dev/infiniband/") || strings.Contains(target, "infinibandevent")) {
			fds = append(fds, e.Name()+"->"+target)
		}
	}
	b, _ := os.ReadFile("/proc/self/maps")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "/dev/infiniband/") {
			maps = append(maps, strings.Fields(line)[0])
		}
	}
	return fds, maps
}
