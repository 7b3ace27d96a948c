//go:build integration

package integration

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"github.com/vishvananda/netlink"
)

// openFDs counts the process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// uverbsMappings counts the mappings of uverbs devices (the rings).
func uverbsMappings(t testing.TB) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), "/dev/infiniband/uverbs")
}

// claimLeaks takes the leaks the garbage collector found (the test dropped
// objects on purpose) and fails unless one starts with each of want.
func claimLeaks(t *testing.T, want ...string) {
	t.Helper()
	got := leakcheck.Collect(2 * time.Second)
	for _, w := range want {
		if !slices.ContainsFunc(got, func(l leakcheck.Leak) bool { return strings.HasPrefix(l.What, w) }) {
			t.Errorf("the leak check did not report a dropped %s; it saw %v", w, got)
		}
	}
}

// rdmaResources is the kernel's resource summary of dev (`rdma resource`:
// RDMA_NLDEV_CMD_RES_GET over netlink): pd, cq, qp, mr, ctx, ... counts.
func rdmaResources(t *testing.T, dev string) map[string]uint64 {
	t.Helper()
	all, err := netlink.RdmaResourceList()
	if err != nil {
		t.Fatalf("rdma resource: %v", err)
	}
	for _, r := range all {
		if r.Name == dev {
			return r.RdmaResourceSummaryEntries
		}
	}
	t.Fatalf("rdma resource: no %s in %d devices", dev, len(all))
	return nil
}

// waitResources waits until dev's resource counts equal want.
func waitResources(t *testing.T, dev string, want map[string]uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := rdmaResources(t, dev)
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s resources %v, want the baseline %v", dev, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitCounterAbove waits until an rxe hardware counter exceeds n.
func waitCounterAbove(t *testing.T, dev, name string, n uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for hwCounter(t, dev, name) <= n {
		if time.Now().After(deadline) {
			t.Fatalf("%s %s stayed at or below %d for %v", dev, name, n, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hwCounter reads one of an rxe port's hardware counters.
func hwCounter(t *testing.T, dev, name string) uint64 {
	t.Helper()
	return portCounter(t, dev, "hw_counters/"+name)
}

// portCounter reads a counter file under dev's port 1 in sysfs
// (/sys/class/infiniband/DEV/ports/1/NAME).
func portCounter(t *testing.T, dev, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/" + name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// hwCounters reads every hardware counter of an rxe port.
func hwCounters(t *testing.T, dev string) map[string]uint64 {
	t.Helper()
	dir := "/sys/class/infiniband/" + dev + "/ports/1/hw_counters/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, e := range ents {
		b, err := os.ReadFile(dir + e.Name())
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err == nil {
			m[e.Name()] = n
		}
	}
	return m
}

// counterDiff names the counters that changed.
func counterDiff(a, b map[string]uint64) string {
	var out []string
	for k, v := range b {
		if v != a[k] {
			out = append(out, fmt.Sprintf("%s+%d", k, v-a[k]))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// uvResources counts what this process holds of the kernel: open fds, and
// mappings of uverbs devices (rxe rings).
type uvResources struct{ fds, ringMaps int }

// uvCount takes both counts.
func uvCount(t testing.TB) uvResources {
	t.Helper()
	return uvResources{fds: openFDs(t), ringMaps: uverbsMappings(t)}
}

// uvSame fails the test unless both counts are what they were before.
func uvSame(t testing.TB, what string, before uvResources) {
	t.Helper()
	if after := uvCount(t); after != before {
		t.Errorf("%s: resources %+v before, %+v after", what, before, after)
	}
}
