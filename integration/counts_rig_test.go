//go:build integration

package integration

import (
	"encoding/binary"
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
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
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

// RDMA netlink (<rdma/rdma_netlink.h>): the resource summary the kernel
// keeps per device, what `rdma resource show` prints.
const (
	rdmaNLNLDev           = 5 << 10 // RDMA_NL_NLDEV << RDMA_NL_GET_CLIENT_SHIFT
	rdmaNLDevCmdResGet    = 9       // RDMA_NLDEV_CMD_RES_GET
	rdmaNLDevAttrDevName  = 2       // RDMA_NLDEV_ATTR_DEV_NAME
	rdmaNLDevAttrResSum   = 15      // RDMA_NLDEV_ATTR_RES_SUMMARY
	rdmaNLDevAttrResEntry = 16      // RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY
	rdmaNLDevAttrResName  = 17      // RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME
	rdmaNLDevAttrResCurr  = 18      // RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR
)

// kernelResources returns the kernel's own counts of pd, cq, qp, mr (and
// whatever else it tracks) for device name.
func kernelResources(t *testing.T, name string) map[string]uint64 {
	t.Helper()
	msgs, err := nl.NewNetlinkRequest(rdmaNLNLDev|rdmaNLDevCmdResGet, unix.NLM_F_DUMP).Execute(unix.NETLINK_RDMA, 0)
	if err != nil {
		t.Fatalf("rdma netlink resource dump: %v", err)
	}
	for _, m := range msgs {
		attrs, err := nl.ParseRouteAttr(m)
		if err != nil {
			t.Fatal(err)
		}
		var dev string
		counts := map[string]uint64{}
		for _, a := range attrs {
			switch a.Attr.Type &^ unix.NLA_F_NESTED {
			case rdmaNLDevAttrDevName:
				dev = strings.TrimRight(string(a.Value), "\x00")
			case rdmaNLDevAttrResSum:
				entries, err := nl.ParseRouteAttr(a.Value)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					if e.Attr.Type&^unix.NLA_F_NESTED != rdmaNLDevAttrResEntry {
						continue
					}
					fields, err := nl.ParseRouteAttr(e.Value)
					if err != nil {
						t.Fatal(err)
					}
					var n string
					var v uint64
					for _, f := range fields {
						switch f.Attr.Type {
						case rdmaNLDevAttrResName:
							n = strings.TrimRight(string(f.Value), "\x00")
						case rdmaNLDevAttrResCurr:
							v = binary.NativeEndian.Uint64(f.Value)
						}
					}
					counts[n] = v
				}
			}
		}
		if dev == name {
			return counts
		}
	}
	t.Fatalf("rdma netlink has no resource summary for %s", name)
	return nil
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

func sameCounts(a, b map[string]uint64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
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
	b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name)
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
