//go:build integration

package integration

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

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

// makeEverything creates a PD, a buffer with an MR, a completion channel, a
// CQ on it and an RC QP under ctx, and returns nothing: the caller drops
// them all.
func makeEverything(t *testing.T, ctx *uverbs.Context) {
	t.Helper()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := uverbs.NewBuffer(1<<16, uverbs.BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	ch, err := cq.NewChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, 64, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	q, err := qp.New(pd, qp.InitAttr{Type: qp.RC, SendCQ: c, RecvCQ: c})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
}

// Ownership proof (a): a context with a PD, an MR, a CQ on a completion
// channel and a QP, all dropped without Close. Once the garbage collector
// has run their cleanups the process holds no uverbs fd or ring mapping and
// no extra fd at all, and the kernel's own resource counts for the device
// are back where they started: nothing is leaked in the kernel either.
func TestOwnershipDroppedObjectsAreReleased(t *testing.T) {
	name := devices(t, 1)[0]
	d, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	before, kernBefore := uvCount(t), kernelResources(t, name)
	func() {
		ctx, err := uverbs.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		makeEverything(t, ctx)
		during := kernelResources(t, name)
		for _, res := range []string{"pd", "cq", "qp", "mr"} {
			if during[res] <= kernBefore[res] {
				t.Fatalf("kernel counts %s %d with the objects alive, %d before: the check would prove nothing", res, during[res], kernBefore[res])
			}
		}
		if got := uvCount(t); got.ringMaps <= before.ringMaps {
			t.Fatalf("no ring mapping while the CQ and QP are alive: %+v", got)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		now, kern := uvCount(t), kernelResources(t, name)
		if now == before && sameCounts(kern, kernBefore) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after dropping everything: process %+v (was %+v), kernel %v (was %v)", now, before, kern, kernBefore)
		}
		time.Sleep(20 * time.Millisecond)
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
