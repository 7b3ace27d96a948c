//go:build integration

package integration

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// streamPair is one run of rstream or riostream: which end is the Go tool,
// the options both ends get, and the row both must print.
type streamPair struct {
	tool               string // "rstream" or "riostream"
	goServer, goClient bool
	args               []string
	port               int
	row                string // name bytes xfers iters total, as printed
}

// streamPeerLimit bounds every end: a broken rxe path hangs rather than
// fails, and a peer that waits for a dead one spins forever.
const streamPeerLimit = 150 * time.Second

// streamNotYet is a client's complaint when the server does not listen
// yet (the connect request is rejected), C's and Go's alike.
var streamNotYet = regexp.MustCompile(`rconnect: Connection refused`)

func streamBin(tool string, goTool bool) string {
	if goTool {
		return "/usr/local/bin/" + tool
	}
	return "/usr/bin/" + tool
}

// run starts the server, runs the client until the server takes it, and
// returns both outputs once both have exited 0.
func (p streamPair) run(t *testing.T) (srvOut, cliOut string) {
	t.Helper()
	port := strconv.Itoa(p.port)
	t.Logf("server %s, client %s: %s", streamBin(p.tool, p.goServer), streamBin(p.tool, p.goClient), strings.Join(p.args, " "))
	srv := startPeer(t, streamPeerLimit, streamBin(p.tool, p.goServer), append([]string{"-b", "10.99.0.1", "-p", port}, p.args...)...)
	cli := runClientUntilListening(t, streamPeerLimit, streamNotYet, streamBin(p.tool, p.goClient),
		append([]string{"-s", "10.99.0.1", "-b", "10.99.0.2", "-p", port}, p.args...)...)
	srvOut = srv.wait(t)
	t.Logf("server:\n%sclient:\n%s", srvOut, cli)
	return srvOut, cli
}

// streamRow matches a result row: five fields, then the time, Gb/sec and
// usec/xfer figures.
var streamRow = regexp.MustCompile(`(?m)^(\S+) +(\S+) +(\S+) +(\S+) +(\S+) +(\d+\.\d\d)s +(\d+\.\d\d|inf) +(\d+\.\d\d)$`)

// checkStreamTable checks out is the header, then exactly the rows given
// (in order), and no verification failure; it returns each row's
// usec/xfer.
func checkStreamTable(t *testing.T, who, out string, rows ...string) []float64 {
	t.Helper()
	const header = "name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n"
	if !strings.Contains(out, header) || strings.Contains(out, "verification failed") {
		t.Fatalf("%s printed:\n%s", who, out)
	}
	ms := streamRow.FindAllStringSubmatch(out, -1)
	if len(ms) != len(rows) {
		t.Fatalf("%s printed %d rows, want %d:\n%s", who, len(ms), len(rows), out)
	}
	var usec []float64
	for i, m := range ms {
		if got := strings.Join(m[1:6], " "); got != rows[i] {
			t.Errorf("%s row %d: %q, want %q:\n%s", who, i, got, rows[i], out)
		}
		f, _ := strconv.ParseFloat(m[8], 64)
		usec = append(usec, f)
	}
	return usec
}

// tools/rstream against librdmacm's rstream over rxe0/rxe1, both ways:
// 64 B, 4 KiB, 64 KiB and 1 MiB with -T v (each end checks the other's
// byte counter), a small -B (16 KiB rings with 64 KiB transfers: every
// transfer wraps them), -i 0, blocking calls (-T b), the C end polling
// (-T a), and the default run (no -S/-C/-I: latency then bandwidth tests
// on two connections, the latency one at -i 0). Every end is killed after
// streamPeerLimit.
func TestRstreamInterop(t *testing.T) {
	devices(t, 2)
	cases := []struct {
		name string
		args string
		rows []string
	}{
		{"64", "-S 64 -C 200 -I 5 -T v", []string{"custom 64 200 5 125k"}},
		{"4k", "-S 4096 -C 100 -I 10 -T v", []string{"custom 4k 100 10 7.8m"}},
		{"64k", "-S 65536 -C 20 -I 2 -T v", []string{"custom 64k 20 2 5m"}},
		{"1m", "-S 1048576 -C 4 -I 2 -T v", []string{"custom 1m 4 2 16m"}},
		{"SmallRing", "-S 65536 -C 10 -I 2 -T v -B 8192", []string{"custom 64k 10 2 2.5m"}},
		{"Inline0", "-S 4096 -C 50 -I 2 -T v -i 0", []string{"custom 4k 50 2 800k"}},
		{"Blocking", "-S 65536 -C 10 -I 3 -T v -T b", []string{"custom 64k 10 3 3.7m"}},
	}
	for i, tc := range cases {
		for _, goServer := range []bool{true, false} {
			name := tc.name + map[bool]string{true: "/GoServerCClient", false: "/CServerGoClient"}[goServer]
			t.Run(name, func(t *testing.T) {
				p := streamPair{tool: "rstream", goServer: goServer, goClient: !goServer, args: strings.Fields(tc.args), port: 7700 + 2*i}
				if !goServer {
					p.port++
				}
				srv, cli := p.run(t)
				checkStreamTable(t, "server ("+streamBin("rstream", goServer)+")", srv, tc.rows...)
				checkStreamTable(t, "client ("+streamBin("rstream", !goServer)+")", cli, tc.rows...)
			})
		}
	}
}

// The C tool's default run against the Go tool, both ways: two connections
// (the latency tests at -i 0, then the bandwidth tests with inline 0),
// each test verified. Long under TCG (a minute or more per direction).
func TestRstreamInteropDefaultRun(t *testing.T) {
	devices(t, 2)
	rows := []string{"64_lat 64 1 100k 12m", "4k_lat 4k 1 10k 78m", "64k_lat 64k 1 1k 125m", "1m_lat 1m 1 100 200m",
		"64_bw 64 100k 1 12m", "4k_bw 4k 10k 1 78m", "64k_bw 64k 1k 1 125m", "1m_bw 1m 100 1 200m"}
	for i, goServer := range []bool{true, false} {
		t.Run(map[bool]string{true: "GoServerCClient", false: "CServerGoClient"}[goServer], func(t *testing.T) {
			p := streamPair{tool: "rstream", goServer: goServer, goClient: !goServer, args: []string{"-T", "v", "-i", "0"}, port: 7760 + i}
			srv, cli := p.run(t)
			checkStreamTable(t, "server", srv, rows...)
			checkStreamTable(t, "client", cli, rows...)
		})
	}
}

// C's rstream -T a (rpoll before every call) against the Go tool.
func TestRstreamInteropAsync(t *testing.T) {
	devices(t, 2)
	for i, goServer := range []bool{true, false} {
		t.Run(map[bool]string{true: "GoServerCClient", false: "CServerGoClient"}[goServer], func(t *testing.T) {
			p := streamPair{tool: "rstream", goServer: goServer, goClient: !goServer, args: []string{"-S", "4096", "-C", "50", "-I", "2", "-T", "v", "-T", "a"}, port: 7770 + i}
			srv, cli := p.run(t)
			checkStreamTable(t, "server", srv, "custom 4k 50 2 800k")
			checkStreamTable(t, "client", cli, "custom 4k 50 2 800k")
		})
	}
}
