// Package rxetest builds Soft-RoCE (rdma_rxe) topologies for tests, on any
// kernel that has rdma_rxe: inside the rxevm VM (go test -exec 'go tool
// rxevm exec') or on a workstation, as root.
//
//	func TestSend(t *testing.T) {
//		p := rxetest.Veth(t) // skipped, naming what is missing, without rdma_rxe or root
//		a, b := p.A.RDMA, p.B.RDMA // e.g. "rxt4242_1a", "rxt4242_1b"
//		...
//	}
//
// Every call makes its own veth pair, addresses and rxe links, under names
// and in a subnet no other call (in this or another process) uses, and
// removes them with t.Cleanup. Each endpoint's GIDIndex is the index of the
// RoCE v2 GID of its address, found in the table (a fresh link fills it in
// no fixed order: do not assume 1). Set RXETEST_REQUIRE=1 (rxevm sets it in
// the VM) to make a missing prerequisite fail the test instead of skipping
// it.
//
// The kernel will not delete an rxe link while a uverbs file of it is open
// or mapped, and would wait without end. So the clean-up looks first: a
// Context (or QP, CQ, SRQ mapping) the test left open fails the test with a
// message naming the process and its fds and mappings, and the link and
// veth pair are left in place rather than the test binary hanging. Close
// everything on the pair before the test ends (defer, or a t.Cleanup
// registered after Veth: clean-ups run last-registered first).
package rxetest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
	"github.com/vishvananda/netlink"
)

// EnvRequire set to 1 turns every skip of this package into a failure:
// for CI and the VM, where a missing rdma_rxe is a broken set-up, not a
// machine that cannot run the test.
const EnvRequire = "RXETEST_REQUIRE"

// Pair is a veth pair with an rxe device on each end: A on the first, B on
// the second. In a loopback pair B is A.
type Pair struct {
	A, B     topology.Endpoint
	Loopback bool
}

// Veth makes a veth pair with an rxe link on each end, accept_local set on
// both, addresses in a subnet of its own, and waits until both rxe devices
// have published the IPv4-mapped RoCE v2 GID of their address (its index is
// the endpoint's GIDIndex). It skips the
// test (or fails it, under RXETEST_REQUIRE=1) when the machine cannot.
func Veth(t testing.TB) *Pair {
	t.Helper()
	return build(t, false)
}

// Loopback makes a veth pair with one rxe device, on its first end; both
// QPs of a test live on that device and talk to its own GID.
func Loopback(t testing.TB) *Pair {
	t.Helper()
	return build(t, true)
}

// Devices returns the names of the pair's rxe devices, A's first (one name
// for a loopback pair).
func (p *Pair) Devices() []string {
	if p.Loopback {
		return []string{p.A.RDMA}
	}
	return []string{p.A.RDMA, p.B.RDMA}
}

// seq numbers the pairs of this process.
var seq atomic.Uint32

func build(t testing.TB, loopback bool) *Pair {
	t.Helper()
	if why := missing(); why != "" {
		skip(t, why)
		return nil
	}
	n := seq.Add(1)
	tp, err := plan(os.Getpid(), n, loopback, usedSubnets())
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(func() {
		err := topology.TeardownPair(tp)
		switch {
		case errors.Is(err, rxelink.ErrHeld):
			t.Errorf("rxetest: the test left a uverbs Context (or an object's mapping) open: %v", err)
		case err != nil:
			t.Errorf("rxetest: remove %s/%s: %v", tp.Netdevs[0], tp.Netdevs[1], err)
		}
	})
	eps, err := topology.SetupPair(tp)
	if err != nil {
		fatal(t, fmt.Errorf("rxetest: %w", err))
	}
	p := &Pair{A: eps[0], B: eps[0], Loopback: loopback}
	if !loopback {
		p.B = eps[1]
	}
	return p
}

// plan names pair n of process pid: netdevs and rxe devices
// rxt<pid>_<n>a/b (at most 15 bytes, the netdev limit) and a /24 in
// 10.100.0.0/12 picked from pid and n, moving on past subnets in use.
func plan(pid int, n uint32, loopback bool, used map[string]bool) (topology.Pair, error) {
	a := fmt.Sprintf("rxt%d_%da", pid%100000, n%1000)
	b := a[:len(a)-1] + "b"
	start := (uint32(pid)*7919 + n*31) % 4096
	for i := uint32(0); i < 4096; i++ {
		idx := (start + i) % 4096
		subnet := net.IPv4(10, byte(100+idx/256), byte(idx%256), 0)
		if used[subnet.String()] {
			continue
		}
		p := topology.Pair{
			Netdevs: [2]string{a, b},
			Addrs: [2]net.IPNet{
				{IP: net.IPv4(10, byte(100+idx/256), byte(idx%256), 1), Mask: net.CIDRMask(24, 32)},
				{IP: net.IPv4(10, byte(100+idx/256), byte(idx%256), 2), Mask: net.CIDRMask(24, 32)},
			},
			RDMA: [2]string{a, b},
		}
		if loopback {
			p.RDMA[1] = ""
		}
		return p, nil
	}
	return topology.Pair{}, fmt.Errorf("rxetest: every /24 of 10.100.0.0/12 is in use")
}

// usedSubnets returns the /24s of the IPv4 addresses already configured.
func usedSubnets() map[string]bool {
	used := map[string]bool{}
	addrs, _ := netlink.AddrList(nil, netlink.FAMILY_V4)
	for _, a := range addrs {
		if ip := a.IP.To4(); ip != nil {
			used[net.IPv4(ip[0], ip[1], ip[2], 0).String()] = true
		}
	}
	return used
}

// The checks missing makes; tests replace them.
var (
	goos      = runtime.GOOS
	euid      = os.Geteuid
	rxeLoaded = func() bool { return rxelink.Loaded("rdma_rxe") }
)

// missing names what the machine lacks to build a topology, or "".
func missing() string {
	switch {
	case goos != "linux":
		return "rdma_rxe needs Linux (this is " + goos + ")"
	case euid() != 0:
		return "creating veth pairs and rxe links needs root (CAP_NET_ADMIN); run the tests as root, or in the VM with go test -exec 'go tool rxevm exec'"
	case !rxeLoaded():
		return "the kernel has no rdma_rxe loaded (/sys/module/rdma_rxe is missing): modprobe rdma_rxe, or run the tests in the VM with go test -exec 'go tool rxevm exec'"
	}
	return ""
}

// Require skips the test (or fails it, under RXETEST_REQUIRE=1) unless the
// machine can build rxe topologies, for tests that use devices made
// elsewhere.
func Require(t testing.TB) {
	t.Helper()
	if why := missing(); why != "" {
		skip(t, why)
	}
}

func skip(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("rxetest: %s (and %s=1 requires it)", why, EnvRequire)
		return
	}
	t.Skipf("rxetest: %s", why)
}

func fatal(t testing.TB, err error) {
	t.Helper()
	t.Fatal(err)
}
