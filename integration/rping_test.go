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
// came back) and -v (both print every ping); -q (a QP of the tool's own,
// driven by rdma_init_qp_attr) on the C side, on the Go server
// (Request.AcceptQP) and on the Go client (Resolve, Route.ConnectQP), each
// against both kinds of peer. The Go side's options are given bundled and
// attached (-cvV -S65535), as getopt(3) takes them.
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
		{name: "CServerGoClientOwnQP", size: 65535, count: 30, goFlag: []string{"-q"}},
		{name: "CServerOwnQPGoClientOwnQP", size: 4000, count: 100, cExtra: []string{"-q"}, goFlag: []string{"-dq"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := strconv.Itoa(7600 + i)
			size, count := strconv.Itoa(tc.size), strconv.Itoa(tc.count)
			cArgs := func(side ...string) []string {
				return append(append(side, "-p", port, "-S", size, "-C", count, "-v"), tc.cExtra...)
			}
			goArgs := func(side string, addrs ...string) []string {
				return append(append([]string{side + "v", "-p" + port, "-S" + size, "-C" + count}, addrs...), tc.goFlag...)
			}
			srvName, cliName, notYet := "/usr/bin/rping", "/usr/local/bin/rping", goRpingRejected
			srvArgs := cArgs("-s", "-a", "10.99.0.1")
			cliArgs := goArgs("-cV", "-I10.99.0.2", "-a10.99.0.1")
			if tc.goServer {
				srvName, cliName, notYet = "/usr/local/bin/rping", "/usr/bin/rping", cRpingRejected
				srvArgs = goArgs("-s", "-a10.99.0.1")
				cliArgs = cArgs("-c", "-I", "10.99.0.2", "-a", "10.99.0.1", "-V")
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
