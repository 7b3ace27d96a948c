package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/tools/internal/streamperf"
)

// freePort is a TCP port nothing listened on a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// resultLine is one row of the table; the last three fields are times.
var resultLine = regexp.MustCompile(`^(\S+ +\S+ +\S+ +\S+ +\S+ +) +\d+\.\d\ds +\d+\.\d\d +\d+\.\d\d$`)

// checkTable checks out is the header and one row per name with the
// fields given (name bytes xfers iters total, as printed).
func checkTable(t *testing.T, who, out string, rows ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(rows)+1 || lines[0]+"\n" != streamperf.Header {
		t.Fatalf("%s printed\n%s", who, out)
	}
	for i, want := range rows {
		m := resultLine.FindStringSubmatch(lines[i+1])
		if m == nil || strings.Join(strings.Fields(m[1]), " ") != want {
			t.Errorf("%s row %d: %q, want %q and three times", who, i, lines[i+1], want)
		}
	}
}

type result struct {
	code           int
	stdout, stderr string
}

func runAsync(args ...string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"rstream"}, args...), &stdout, &stderr)
		ch <- result{code, stdout.String(), stderr.String()}
	}()
	return ch
}

// Go against Go over TCP (-T s): each end verifies the other's pattern
// (-T v), custom runs at the sizes the interop tests use, blocking and
// not, and a failed connect's perror line and status 255.
func TestTCP(t *testing.T) {
	for _, tc := range []struct{ args, row string }{
		{"-S 64 -C 50 -I 4 -T v", "custom 64 50 4 25k"},
		{"-S 4096 -C 20 -I 3 -T v -T b", "custom 4k 20 3 480k"},
		{"-S 65536 -C 5 -I 2 -T v -B 65536", "custom 64k 5 2 1.2m"},
		{"-S 1048576 -C 2 -I 1 -T verify", "custom 1m 2 1 4m"},
		{"-S 10 -C 3 -T v", "custom 10 3 1 60"}, // smaller than the sync
	} {
		port := freePort(t)
		args := append(strings.Fields(tc.args), "-T", "s", "-p", port)
		srv := runAsync(append([]string{"-b", "127.0.0.1"}, args...)...)
		var cli result
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			cli = <-runAsync(append([]string{"-s", "127.0.0.1"}, args...)...)
			if !strings.Contains(cli.stderr, "Connection refused") || time.Now().After(deadline) {
				break
			}
		}
		s := <-srv
		if cli.code != 0 || s.code != 0 || cli.stderr != "" || s.stderr != "" {
			t.Fatalf("%s: client %+v, server %+v", tc.args, cli, s)
		}
		checkTable(t, "client", cli.stdout, tc.row)
		checkTable(t, "server", s.stdout, tc.row)
	}
	r := <-runAsync("-s", "127.0.0.1", "-p", freePort(t), "-T", "s", "-S", "64", "-C", "1")
	if r.code != 255 || r.stderr != "rconnect: Connection refused\n" || r.stdout != streamperf.Header {
		t.Errorf("connect to nobody: %+v", r)
	}
	// -f ip takes no names: getaddrinfo's EAI_NONAME, its line on stdout
	// after the header, status 254 (-2).
	r = <-runAsync("-s", "localhost", "-f", "ip", "-T", "s", "-S", "64", "-C", "1")
	if r.code != 254 || r.stderr != "" || r.stdout != streamperf.Header+"getaddrinfo: Name or service not known\n" {
		t.Errorf("-f ip with a name: %+v", r)
	}
}

// cRstream is librdmacm's rstream from the VM's cache (make setup), run
// on this host over TCP (-T s needs no RDMA); the test skips without it.
func cRstream(t *testing.T) *exec.Cmd {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the cached rstream is an amd64 Linux binary")
	}
	cache := os.Getenv("RXEVM_CACHE")
	if cache == "" {
		cache = "../../.cache/rxevm"
	}
	peers, _ := filepath.Abs(filepath.Join(cache, "peers"))
	bin := filepath.Join(peers, "usr/bin/rstream")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no C rstream in %s (make setup): %v", peers, err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(peers, "usr/lib/x86_64-linux-gnu")+":"+filepath.Join(peers, "lib/x86_64-linux-gnu"))
	return cmd
}

// The Go tool against librdmacm's over TCP, both ways: the C end verifies
// the Go end's pattern (-T v) and both print the same rows.
func TestAgainstC(t *testing.T) {
	cRstream(t)
	for _, tc := range []struct {
		args, row string
		goServer  bool
	}{
		{"-S 4096 -C 20 -I 3 -T v", "custom 4k 20 3 480k", true},
		{"-S 4096 -C 20 -I 3 -T v", "custom 4k 20 3 480k", false},
		{"-S 1048576 -C 3 -I 2 -T v -T b", "custom 1m 3 2 12m", true},
		{"-S 1048576 -C 3 -I 2 -T v -T b", "custom 1m 3 2 12m", false},
		{"-S 64 -C 100 -I 2 -T v -B 16384", "custom 64 100 2 25k", false},
	} {
		port := freePort(t)
		args := append(strings.Fields(tc.args), "-T", "s", "-p", port)
		var srv <-chan result
		c := cRstream(t)
		var cout, cerr bytes.Buffer
		c.Stdout, c.Stderr = &cout, &cerr
		if tc.goServer {
			srv = runAsync(args...)
			c.Args = append(append(c.Args, "-s", "127.0.0.1"), args...)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				cout.Reset()
				cerr.Reset()
				c2 := exec.Command(c.Path, c.Args[1:]...)
				c2.Env, c2.Stdout, c2.Stderr = c.Env, &cout, &cerr
				err := c2.Run()
				if err == nil || !strings.Contains(cerr.String(), "Connection refused") || time.Now().After(deadline) {
					if err != nil {
						t.Fatalf("C client %s: %v\n%s%s", tc.args, err, cout.String(), cerr.String())
					}
					break
				}
			}
			s := <-srv
			if s.code != 0 || s.stderr != "" {
				t.Fatalf("Go server %s: %+v", tc.args, s)
			}
			checkTable(t, "Go server", s.stdout, tc.row)
		} else {
			c.Args = append(append(c.Args, "-b", "127.0.0.1"), args...)
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			var cli result
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				cli = <-runAsync(append([]string{"-s", "127.0.0.1"}, args...)...)
				if !strings.Contains(cli.stderr, "Connection refused") || time.Now().After(deadline) {
					break
				}
			}
			if err := c.Wait(); err != nil || cli.code != 0 || cli.stderr != "" {
				t.Fatalf("%s: C server %v\n%s%s\nGo client %+v", tc.args, err, cout.String(), cerr.String(), cli)
			}
			checkTable(t, "Go client", cli.stdout, tc.row)
		}
		checkTable(t, "C "+map[bool]string{true: "client", false: "server"}[tc.goServer], cout.String(), tc.row)
	}
}
