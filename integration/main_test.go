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

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
)

// TestMain fails the run when a test left anything to the garbage
// collector: every fd, mapping and kernel object a test makes must be
// closed by it (the tests of the GC safety net claim what they drop with
// leakcheck.Take), or a forgotten Close hides behind a passing test.
// leakcheck.Main names each leak and the stack that created it. After
// that, the process must hold no uverbs fd or ring mapping at all: what
// is neither closed nor collected is still referenced somewhere.
func TestMain(m *testing.M) {
	code := leakcheck.Main(m)
	if held := uverbsHeldAfterGC(); held != "" {
		fmt.Fprintf(os.Stderr, "integration: the tests left %s open\n", held)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// uverbsHeldAfterGC describes the uverbs fds and mappings the process
// still holds once the garbage collector has run; "" when there are none.
func uverbsHeldAfterGC() string {
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	fds, maps := uverbsHeld()
	if len(fds)+len(maps) == 0 {
		return ""
	}
	return fmt.Sprintf("%d uverbs fds %v and %d uverbs mappings %v", len(fds), fds, len(maps), maps)
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
