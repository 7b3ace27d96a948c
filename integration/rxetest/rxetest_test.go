package rxetest

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of
// stopping the goroutine.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                         {}
func (r *recorder) Skipf(f string, a ...any)        { r.skipped = fmt.Sprintf(f, a...) }
func (r *recorder) Fatalf(f string, a ...any)       { r.failed = fmt.Sprintf(f, a...) }
func (r *recorder) Cleanup(func())                  {}
func (r *recorder) Errorf(f string, a ...any)       { r.failed = fmt.Sprintf(f, a...) }
func (r *recorder) Fatal(a ...any)                  { r.failed = fmt.Sprint(a...) }
func (r *recorder) Logf(format string, args ...any) {}

func fake(t *testing.T, os string, uid int, rxe bool) {
	savedOS, savedEUID, savedRXE := goos, euid, rxeLoaded
	t.Cleanup(func() { goos, euid, rxeLoaded = savedOS, savedEUID, savedRXE })
	goos, euid, rxeLoaded = os, func() int { return uid }, func() bool { return rxe }
}

func TestSkipsNamingWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name string
		os   string
		uid  int
		rxe  bool
		want string // in the skip message
	}{
		{"not root", "linux", 1000, true, "needs root"},
		{"no rdma_rxe", "linux", 0, false, "no rdma_rxe loaded"},
		{"not linux", "darwin", 0, true, "needs Linux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake(t, tc.os, tc.uid, tc.rxe)
			t.Setenv(EnvRequire, "")
			r := &recorder{TB: t}
			if p := Veth(r); p != nil {
				t.Fatalf("Veth returned %+v on a machine that cannot", p)
			}
			if !strings.Contains(r.skipped, tc.want) || r.failed != "" {
				t.Errorf("skipped %q, failed %q; want a skip saying %q", r.skipped, r.failed, tc.want)
			}
			t.Setenv(EnvRequire, "1")
			r = &recorder{TB: t}
			Loopback(r)
			if !strings.Contains(r.failed, tc.want) || !strings.Contains(r.failed, EnvRequire) || r.skipped != "" {
				t.Errorf("under %s=1: failed %q, skipped %q; want a failure saying %q", EnvRequire, r.failed, r.skipped, tc.want)
			}
		})
	}
	fake(t, "linux", 0, true)
	if why := missing(); why != "" {
		t.Errorf("root with rdma_rxe on Linux: missing %q", why)
	}
}

func TestPlanNamesAndSubnets(t *testing.T) {
	p, err := plan(4242, 1, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Netdevs != [2]string{"rxt4242_1a", "rxt4242_1b"} || p.RDMA != p.Netdevs {
		t.Errorf("names %v %v", p.Netdevs, p.RDMA)
	}
	long, _ := plan(99999, 999, false, nil)
	if len(long.Netdevs[0]) > 15 {
		t.Errorf("netdev name %q is longer than IFNAMSIZ-1", long.Netdevs[0])
	}
	a, b := p.Addrs[0], p.Addrs[1]
	if !a.Contains(b.IP) || a.IP.Equal(b.IP) || a.IP.To4()[0] != 10 || a.IP.To4()[1] < 100 || a.IP.To4()[1] > 115 {
		t.Errorf("addresses %s %s: want two in one /24 of 10.100.0.0/12", a.String(), b.String())
	}
	// A subnet in use is passed over.
	used := map[string]bool{a.IP.Mask(a.Mask).String(): true}
	q, _ := plan(4242, 1, false, used)
	if q.Addrs[0].IP.Mask(q.Addrs[0].Mask).Equal(a.IP.Mask(a.Mask)) {
		t.Errorf("plan took the used subnet %s", a.IP.Mask(a.Mask))
	}
	// The next pair of the process gets other names and another subnet.
	n, _ := plan(4242, 2, false, nil)
	if n.Netdevs[0] == p.Netdevs[0] || n.Addrs[0].IP.Mask(n.Addrs[0].Mask).Equal(a.IP.Mask(a.Mask)) {
		t.Errorf("pairs 1 and 2 collide: %v %s / %v %s", p.Netdevs, a.String(), n.Netdevs, n.Addrs[0].String())
	}
	l, _ := plan(4242, 3, true, nil)
	if l.RDMA[1] != "" || len(l.Endpoints()) != 1 {
		t.Errorf("loopback plan has rxe links %v", l.RDMA)
	}
}
