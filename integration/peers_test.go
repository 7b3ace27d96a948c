//go:build integration

package integration

import (
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
)

// rdma-core's own tools must work in the image before they can judge ours.
func TestCToolsDevinfo(t *testing.T) {
	for i, dev := range devices(t, 1) {
		out := runPeer(t, 30*time.Second, "ibv_devinfo", "-d", dev, "-v")
		for _, want := range []string{"hca_id:\t" + dev, "PORT_ACTIVE", "link_layer:\t\tEthernet",
			"::ffff:10.99.0." + strconv.Itoa(i+1) + ", RoCE v2"} {
			if !strings.Contains(out, want) {
				t.Errorf("ibv_devinfo -d %s lacks %q:\n%s", dev, want, out)
			}
		}
	}
}

var (
	pingpongBytes = regexp.MustCompile(`(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec`)
	pingpongIters = regexp.MustCompile(`(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter`)
)

// checkPingpong checks the summary ibv_rc_pingpong prints at each end.
func checkPingpong(t *testing.T, side, out string, size, iters int) {
	t.Helper()
	b := pingpongBytes.FindStringSubmatch(out)
	it := pingpongIters.FindStringSubmatch(out)
	if b == nil || it == nil {
		t.Fatalf("%s printed no summary:\n%s", side, out)
	}
	if got, want := b[1], strconv.Itoa(2*size*iters); got != want {
		t.Errorf("%s moved %s bytes, want %s", side, got, want)
	}
	if it[1] != strconv.Itoa(iters) {
		t.Errorf("%s ran %s iterations, want %d", side, it[1], iters)
	}
	t.Logf("%s: %s", side, strings.TrimSpace(it[0]))
}

// The C server on rxe0 and the C client on rxe1 across the veth pair, with
// non-default size, count and port, in both polling and event modes.
func TestCToolsRCPingpong(t *testing.T) {
	devs := devices(t, 2)
	server := topology.MappedGID(net.ParseIP("10.99.0.1")) // sanity: layout as documented
	if server == "" {
		t.Fatal("no mapped GID")
	}
	for _, tc := range []struct {
		name   string
		extra  []string
		size   int
		iters  int
		port   string
		events bool
	}{
		{name: "poll", size: 2048, iters: 200, port: "18600"},
		{name: "events", size: 100, iters: 100, port: "18601", events: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-s", strconv.Itoa(tc.size), "-n", strconv.Itoa(tc.iters), "-p", tc.port}
			if tc.events {
				args = append(args, "-e")
			}
			srv := startPeer(t, 60*time.Second, "ibv_rc_pingpong", append([]string{"-d", devs[0], "-g", gidArg(t, devs[0])}, args...)...)
			port, _ := strconv.Atoi(tc.port)
			waitListening(t, srv, port, 30*time.Second)
			cli := runPeer(t, 60*time.Second, "ibv_rc_pingpong", append(append([]string{"-d", devs[1], "-g", gidArg(t, devs[1])}, args...), "10.99.0.1")...)
			checkPingpong(t, "client", cli, tc.size, tc.iters)
			checkPingpong(t, "server", srv.wait(t), tc.size, tc.iters)
		})
	}
}
