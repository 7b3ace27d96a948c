//go:build integration

package integration

import (
	"reflect"
	"strconv"
	"testing"
	"time"
)

// pureverbs creates an SRQ, and QPs on it, with the very commands
// libibverbs 44 sends for ibv_srq_pingpong's: UVERBS_METHOD_SRQ_CREATE
// (object 5, method 0) and UVERBS_METHOD_QP_CREATE with the SRQ handle
// (object 4, method 0), the same attributes in the same order, of the same
// lengths and flags. Both are traced as clients of an ibv_srq_pingpong
// server.
func TestSRQCreateIoctlLikeLibibverbs(t *testing.T) {
	devs := devices(t, 2)
	trace := func(tool, port string) ([]ioctlShape, string) {
		args := []string{"-q", "2", "-r", "8", "-n", "10", "-p", port}
		srv := startPeer(t, 60*time.Second, "ibv_srq_pingpong", append([]string{"-d", devs[0], "-g", gidArg(t, devs[0])}, args...)...)
		p, _ := strconv.Atoi(port)
		waitListening(t, srv, p, 30*time.Second)
		calls, out := traceIoctls(t, 60*time.Second, tool, append(append([]string{"-d", devs[1], "-g", gidArg(t, devs[1])}, args...), "10.99.0.1")...)
		srv.wait(t)
		return calls, out
	}
	goCalls, goOut := trace("srq-pingpong", "18709")
	cCalls, cOut := trace("ibv_srq_pingpong", "18710")
	for _, m := range []struct {
		name           string
		object, method uint16
		want           int
	}{{"create_srq", 5, 0, 1}, {"create_qp", 4, 0, 2}} {
		g, c := methodCalls(goCalls, m.object, m.method), methodCalls(cCalls, m.object, m.method)
		if len(g) != m.want || len(c) != m.want {
			t.Fatalf("%s ioctls: pureverbs %d, libibverbs %d; want %d\npureverbs: %+v\n%s\nlibibverbs: %+v\n%s", m.name, len(g), len(c), m.want, goCalls, goOut, cCalls, cOut)
		}
		for i := range g {
			if !reflect.DeepEqual(g[i], c[i]) {
				t.Errorf("%s ioctl %d:\npureverbs  %+v\nlibibverbs %+v", m.name, i, g[i], c[i])
			}
		}
		t.Logf("%s ioctl of both: %+v", m.name, c[0])
	}
}
