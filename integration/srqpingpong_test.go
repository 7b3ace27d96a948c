//go:build integration

package integration

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// srqPingpongRun is one server/client pair of ibv_srq_pingpong-style tools:
// the server on rxe0 (10.99.0.1), the client on rxe1.
type srqPingpongRun struct {
	server, client             string
	qps, size, iters, rx       int
	port                       int
	serverEvents, clientEvents bool
}

func (r srqPingpongRun) args(t testing.TB, dev string, events bool) []string {
	args := []string{"-d", dev, "-g", gidArg(t, dev), "-q", strconv.Itoa(r.qps), "-s", strconv.Itoa(r.size),
		"-n", strconv.Itoa(r.iters), "-r", strconv.Itoa(r.rx), "-p", strconv.Itoa(r.port)}
	if events {
		args = append(args, "-e")
	}
	return args
}

var srqPingpongAddr = regexp.MustCompile(`(?m)^  (local|remote) address: +LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6}), GID (\S+)$`)

// srqAddresses returns one end's local and remote address lines, which must
// come as n local lines then n remote lines.
func srqAddresses(t *testing.T, side, out string, n int) (local, remote [][4]string) {
	t.Helper()
	m := srqPingpongAddr.FindAllStringSubmatch(out, -1)
	if len(m) != 2*n {
		t.Fatalf("%s printed %d address lines, want %d:\n%s", side, len(m), 2*n, out)
	}
	for i, l := range m {
		var f [4]string
		copy(f[:], l[2:])
		want := "local"
		if i >= n {
			want = "remote"
		}
		if l[1] != want {
			t.Fatalf("%s: address line %d is %s, want %s:\n%s", side, i, l[1], want, out)
		}
		if i < n {
			local = append(local, f)
		} else {
			remote = append(remote, f)
		}
	}
	return local, remote
}

// tools/srq-pingpong against rdma-core's ibv_srq_pingpong in both
// directions, with non-default QP counts, sizes, iterations, receive
// depths and ports, polling and with events: every address record arrives
// at the right QP index, both ends move 2*size*iters bytes.
func TestSRQPingpong(t *testing.T) {
	for _, r := range []srqPingpongRun{
		{server: "srq-pingpong", client: "ibv_srq_pingpong", qps: 5, size: 2000, iters: 300, rx: 64, port: 18620},
		{server: "ibv_srq_pingpong", client: "srq-pingpong", qps: 7, size: 100, iters: 200, rx: 40, port: 18621},
		{server: "srq-pingpong", client: "ibv_srq_pingpong", qps: 3, size: 4096, iters: 150, rx: 16, port: 18622, serverEvents: true, clientEvents: true},
		{server: "ibv_srq_pingpong", client: "srq-pingpong", qps: 16, size: 1024, iters: 500, rx: 100, port: 18623, clientEvents: true},
		{server: "srq-pingpong", client: "srq-pingpong", qps: 4, size: 3000, iters: 200, rx: 32, port: 18624},
		// Baselines for the timings: C against C, and Go against Go, with
		// the first pair's parameters.
		{server: "ibv_srq_pingpong", client: "ibv_srq_pingpong", qps: 5, size: 2000, iters: 300, rx: 64, port: 18625},
		{server: "srq-pingpong", client: "srq-pingpong", qps: 5, size: 2000, iters: 300, rx: 64, port: 18626},
	} {
		t.Run(r.server+"-"+r.client+"-q"+strconv.Itoa(r.qps)+"-p"+strconv.Itoa(r.port), func(t *testing.T) {
			devs := devices(t, 2)
			srv := startPeer(t, 90*time.Second, r.server, r.args(t, devs[0], r.serverEvents)...)
			waitListening(t, srv, r.port, 30*time.Second)
			cli := runPeer(t, 90*time.Second, r.client, append(r.args(t, devs[1], r.clientEvents), "10.99.0.1")...)
			sout := srv.wait(t)
			sl, sr := srqAddresses(t, "server "+r.server, sout, r.qps)
			cl, cr := srqAddresses(t, "client "+r.client, cli, r.qps)
			for i := range r.qps {
				if sl[i] != cr[i] || cl[i] != sr[i] {
					t.Errorf("QP %d: server local %v remote %v, client local %v remote %v", i, sl[i], sr[i], cl[i], cr[i])
				}
				if sl[i][3] != "::ffff:10.99.0.1" || cl[i][3] != "::ffff:10.99.0.2" {
					t.Errorf("QP %d GIDs: %s, %s", i, sl[i][3], cl[i][3])
				}
			}
			checkPingpong(t, "server "+r.server, sout, r.size, r.iters)
			checkPingpong(t, "client "+r.client, cli, r.size, r.iters)
		})
	}
}

// The C tool's refusal of more QPs than receives, in the same words.
func TestSRQPingpongTooFewReceives(t *testing.T) {
	for _, tool := range []string{"ibv_srq_pingpong", "srq-pingpong"} {
		p := startPeer(t, 30*time.Second, tool, "-q", "8", "-r", "4")
		<-p.done
		if p.err == nil {
			t.Errorf("%s -q 8 -r 4 succeeded", tool)
		}
		if want := "rx_depth 4 is too small for 8 QPs -- must have at least one receive per QP."; !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(p.out.String()) {
			t.Errorf("%s: %q lacks %q", tool, p.out.String(), want)
		}
	}
}
