//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runClientUntilListening runs a CM client until its server listens: a
// connect to a port nobody listens on is rejected at once (reason 8), and
// the client exits saying so, matching notYet; it is started again.
func runClientUntilListening(t *testing.T, limit time.Duration, notYet *regexp.Regexp, name string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		p := startPeer(t, limit, name, args...)
		<-p.done
		out := p.out.String()
		if p.err == nil {
			return out
		}
		if !notYet.MatchString(out) || time.Now().After(deadline) {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), p.err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var (
	cRpingRejected  = regexp.MustCompile(`RDMA_CM_EVENT_REJECTED, error 8`)
	goRpingRejected = regexp.MustCompile(`rejected: reason 8`)
	cDiagnostics    = regexp.MustCompile(`(server|client) DISCONNECT EVENT\.\.\.\n|wait for [A-Z_]+ state \d+\n`)
	pingData        = regexp.MustCompile(`(?m)^(server )?ping data: rdma-ping-(\d+): `)
)

// checkPings checks that out shows pings 0..count-1 in order, with the
// prefix ("ping data" for a client, "server ping data" for a server).
func checkPings(t *testing.T, side, out string, server bool, count int) {
	t.Helper()
	// The C tool's stdout is buffered and its stderr is not: its
	// diagnostics may land inside a line of pings.
	out = cDiagnostics.ReplaceAllString(out, "")
	var n int
	for _, m := range pingData.FindAllStringSubmatch(out, -1) {
		if (m[1] != "") != server {
			continue
		}
		if m[2] != strconv.Itoa(n) {
			t.Fatalf("%s: ping %s where %d was due:\n%s", side, m[2], n, out)
		}
		n++
	}
	if n != count {
		t.Errorf("%s printed %d pings, want %d:\n%s", side, n, count, out)
	}
}

// tools/rping against rdma-core's rping across the veth pair, both ways,
// with non-default sizes, counts and ports, -V (the client compares what
// came back) and -v (both print every ping); the C side once with -q
// (its own QP driven by rdma_init_qp_attr), the Go server once with -q.
func TestRpingInterop(t *testing.T) {
	devices(t, 2)
	for i, tc := range []struct {
		name           string
		goServer       bool
		size, count    int
		cExtra, goFlag []string
	}{
		{name: "CServerGoClient", size: 65535, count: 20},
		{name: "CServerGoClientSmall", size: 26, count: 200, cExtra: []string{"-q"}},
		{name: "GoServerCClient", goServer: true, size: 65535, count: 20},
		{name: "GoServerCClientOwnQP", goServer: true, size: 1000, count: 120, cExtra: []string{"-q"}, goFlag: []string{"-q"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := strconv.Itoa(7600 + i)
			common := []string{"-p", port, "-S", strconv.Itoa(tc.size), "-C", strconv.Itoa(tc.count), "-v"}
			srvArgs := append([]string{"-s", "-a", "10.99.0.1"}, common...)
			cliArgs := append([]string{"-c", "-I", "10.99.0.2", "-a", "10.99.0.1", "-V"}, common...)
			srvName, cliName, notYet := "/usr/bin/rping", "/usr/local/bin/rping", goRpingRejected
			if tc.goServer {
				srvName, cliName, notYet = "/usr/local/bin/rping", "/usr/bin/rping", cRpingRejected
				srvArgs = append(srvArgs, tc.goFlag...)
				cliArgs = append(cliArgs, tc.cExtra...)
			} else {
				srvArgs = append(srvArgs, tc.cExtra...)
			}
			srv := startPeer(t, 120*time.Second, srvName, srvArgs...)
			cli := runClientUntilListening(t, 100*time.Second, notYet, cliName, cliArgs...)
			out := srv.wait(t)
			checkPings(t, fmt.Sprintf("client (%s)", cliName), cli, false, tc.count)
			checkPings(t, fmt.Sprintf("server (%s)", srvName), out, true, tc.count)
			if strings.Contains(cli, "mismatch") || strings.Contains(out, "mismatch") {
				t.Errorf("data mismatch:\n%s\n%s", cli, out)
			}
		})
	}
}
