//go:build integration

package integration

import (
	"cmp"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// streamPair is one run of rstream or riostream: which end is the Go tool,
// the options both ends get, the port and the limit of each end's life.
type streamPair struct {
	tool               string // "rstream" or "riostream"
	goServer, goClient bool
	args               []string
	port               int
	// limit bounds each end's life; 0 means streamPeerLimit.
	limit time.Duration
	// pids, if set, gets the server's and the accepted client's process
	// ids.
	pids *[2]int
}

// streamPeerLimit bounds every end: a broken rxe path hangs rather than
// fails, and a peer that waits for a dead one spins forever.
const streamPeerLimit = 150 * time.Second

// streamCListenSettle is how long a C server gets to set its listener's
// options before the first connect request.
const streamCListenSettle = time.Second

// streamOrphanGrace is how long an end may go on once its peer failed.
const streamOrphanGrace = 10 * time.Second

// streamNotYet is a client's complaint when the server does not listen
// yet: the connect request is rejected, which the Go tool and a blocking C
// client report from rconnect and a non-blocking C client from the rpoll
// that waits for the connect (its errno by then is whatever came last:
// "Success", "Connection refused", "Operation now in progress"; exit
// status 8 or, over TCP, 24: the POLLERR and POLLHUP bits).
var streamNotYet = regexp.MustCompile(`rconnect: Connection refused|rpoll: `)

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
	t.Logf("server %s, client %s: %s", streamBin(p.tool, p.goServer), streamBin(p.tool, p.goClient), strings.Join(p.args, " "))
	srvOut, cliOut, err := p.try(t)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server:\n%sclient:\n%s", srvOut, cliOut)
	return srvOut, cliOut
}

// try is run returning a failure (an end's exit status or time limit, with
// its output) instead of failing the test.
func (p streamPair) try(t *testing.T) (srvOut, cliOut string, err error) {
	t.Helper()
	port := strconv.Itoa(p.port)
	srvName := streamBin(p.tool, p.goServer)
	srvArgs := append([]string{"-b", "10.99.0.1", "-p", port}, p.args...)
	limit := cmp.Or(p.limit, streamPeerLimit)
	srv := startPeer(t, limit, srvName, srvArgs...)
	if !p.goServer {
		// The C server listens (rlisten) before it sets its options on the
		// listener (set_options in server_connect); a connect request taken
		// in between gets rsocket's defaults: no iomap table (the Go
		// riostream client's riomap then fails with ENOMEM, seen once in 13
		// runs of the matrix) and 128 KiB rings instead of -B's.
		time.Sleep(streamCListenSettle)
	}
	cliName := streamBin(p.tool, p.goClient)
	cliArgs := append([]string{"-s", "10.99.0.1", "-b", "10.99.0.2", "-p", port}, p.args...)
	deadline := time.Now().Add(limit)
	var cliPid int
	for {
		cli := startPeer(t, limit, cliName, cliArgs...)
		cliPid = cli.cmd.Process.Pid
		select {
		case <-cli.done:
		case <-srv.done:
			// A server that failed may leave its client spinning on a
			// connection nobody serves: it gets streamOrphanGrace.
			if srv.err != nil {
				select {
				case <-cli.done:
				case <-time.After(streamOrphanGrace):
					cli.cmd.Process.Kill()
					<-cli.done
				}
			}
			<-cli.done
		}
		cliOut = cli.out.String()
		if cli.err == nil {
			break
		}
		if !streamNotYet.MatchString(cliOut) || time.Now().After(deadline) {
			srv.cmd.Process.Kill()
			<-srv.done
			return srv.out.String(), cliOut, fmt.Errorf("client %s %s: %v\n%s\nserver %s:\n%s",
				cliName, strings.Join(cliArgs, " "), cli.err, cliOut, srvName, srv.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	<-srv.done
	if p.pids != nil {
		*p.pids = [2]int{srv.cmd.Process.Pid, cliPid}
	}
	srvOut = srv.out.String()
	if srv.err != nil {
		return srvOut, cliOut, fmt.Errorf("server %s %s: %v\n%s\nclient %s:\n%s",
			srvName, strings.Join(srvArgs, " "), srv.err, srvOut, cliName, cliOut)
	}
	return srvOut, cliOut, nil
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
// byte counter), a small -B (16 KiB rings under 64 KiB transfers: every
// transfer wraps them), -i 0 (which the C tool, like the Go one, applies
// only to its default run's latency connection), and blocking calls
// (-T b). Every end is killed after streamPeerLimit.
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
// each test verified. Under TCG on a busy host it takes far longer than
// the other cases (the 64 B latency test alone is 200 000 transfers): on
// 6.1 the Go server against the C client took 545 s, 359 s of it the 64 B
// latency test at 1.8 ms per transfer, and the other way 294 s (both
// passed), so it runs only with RXEVM_SOAK=1
// (make soak SOAKRUN=TestRstreamInteropDefaultRun), each end bounded by 30
// minutes.
func TestRstreamInteropDefaultRun(t *testing.T) {
	if os.Getenv("RXEVM_SOAK") != "1" {
		t.Skip("long: runs with RXEVM_SOAK=1")
	}
	devices(t, 2)
	rows := []string{"64_lat 64 1 100k 12m", "4k_lat 4k 1 10k 78m", "64k_lat 64k 1 1k 125m", "1m_lat 1m 1 100 200m",
		"64_bw 64 100k 1 12m", "4k_bw 4k 10k 1 78m", "64k_bw 64k 1k 1 125m", "1m_bw 1m 100 1 200m"}
	for i, goServer := range []bool{true, false} {
		t.Run(map[bool]string{true: "GoServerCClient", false: "CServerGoClient"}[goServer], func(t *testing.T) {
			p := streamPair{tool: "rstream", goServer: goServer, goClient: !goServer, args: []string{"-T", "v", "-i", "0"}, port: 7760 + i, limit: 30 * time.Minute}
			srv, cli := p.run(t)
			checkStreamTable(t, "server", srv, rows...)
			checkStreamTable(t, "client", cli, rows...)
		})
	}
}

// Go against Go over rxe, as a check of the tool on its own: 64 KiB with
// -T v on a small ring.
func TestRstreamGoGo(t *testing.T) {
	devices(t, 2)
	p := streamPair{tool: "rstream", goServer: true, goClient: true, args: strings.Fields("-S 65536 -C 10 -I 2 -T v -B 8192"), port: 7775}
	srv, cli := p.run(t)
	checkStreamTable(t, "server", srv, "custom 64k 10 2 2.5m")
	checkStreamTable(t, "client", cli, "custom 64k 10 2 2.5m")
}

// -T a (rpoll before every call in the C tool) both ways. The C client
// under -T a fails when its poll reports the peer's disconnect (POLLHUP)
// with the last transfer still unread (C against C did so in 2 of 6 runs
// of "-S 64 -C 5 -I 1 -T a" on 6.1): the Go server waits for the client to
// close first (streamperf's awaitClose), so against it the C client passes.
func TestRstreamInteropAsync(t *testing.T) {
	devices(t, 2)
	for i, goServer := range []bool{true, false} {
		t.Run(map[bool]string{true: "GoServerCClient", false: "CServerGoClient"}[goServer], func(t *testing.T) {
			p := streamPair{tool: "rstream", goServer: goServer, goClient: !goServer, args: []string{"-S", "4096", "-C", "50", "-I", "2", "-T", "v", "-T", "a"}, port: 7770 + 2*i}
			srv, cli := p.run(t)
			checkStreamTable(t, "server", srv, "custom 4k 50 2 800k")
			checkStreamTable(t, "client", cli, "custom 4k 50 2 800k")
		})
	}
}

// tools/riostream against librdmacm's riostream, both ways: 64 B, 4 KiB,
// 64 KiB and 1 MiB with -T v (the receiver checks the last write of each
// turn), a small -B, blocking calls and -T a. The C client binds no source (its
// -b is a TODO in riostream.c).
func TestRiostreamInterop(t *testing.T) {
	devices(t, 2)
	cases := []struct {
		name string
		args string
		row  string
	}{
		{"64", "-S 64 -C 20 -I 20 -T v", "custom 64 20 20 50k"},
		{"4k", "-S 4096 -C 50 -I 5 -T v", "custom 4k 50 5 1.9m"},
		{"64k", "-S 65536 -C 10 -I 3 -T v", "custom 64k 10 3 3.7m"},
		{"1m", "-S 1048576 -C 3 -I 2 -T v", "custom 1m 3 2 12m"},
		{"SmallRing", "-S 65536 -C 5 -I 2 -T v -B 8192", "custom 64k 5 2 1.2m"},
		{"Blocking", "-S 4096 -C 20 -I 5 -T v -T b", "custom 4k 20 5 800k"},
		{"Async", "-S 4096 -C 20 -I 5 -T v -T a", "custom 4k 20 5 800k"},
	}
	for i, tc := range cases {
		for _, goServer := range []bool{true, false} {
			name := tc.name + map[bool]string{true: "/GoServerCClient", false: "/CServerGoClient"}[goServer]
			t.Run(name, func(t *testing.T) {
				p := streamPair{tool: "riostream", goServer: goServer, goClient: !goServer, args: strings.Fields(tc.args), port: 7780 + 2*i}
				if !goServer {
					p.port++
				}
				srv, cli := p.run(t)
				checkStreamTable(t, "server", srv, tc.row)
				checkStreamTable(t, "client", cli, tc.row)
			})
		}
	}
}
