//go:build integration

package integration

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// perftestHeaderBlock returns the output's header block (test name line
// through the dashed line after "Data ex. method") and its address lines,
// in order; stderr lines, which C writes ahead of its buffered stdout, are
// left out because the block is taken whole from stdout's part.
func perftestHeaderBlock(out string) []string {
	lines := strings.Split(out, "\n")
	dual := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, " Dual-port") })
	if dual < 0 {
		return nil
	}
	start := dual
	for start > 0 && !strings.HasSuffix(strings.TrimSpace(lines[start]), "Test") {
		start--
	}
	end := dual
	for end < len(lines) && !strings.HasPrefix(lines[end], " Data ex. method") {
		end++
	}
	for end < len(lines) && !strings.HasPrefix(lines[end], "-----") {
		end++
	}
	block := slices.Clone(lines[start:min(end+1, len(lines))])
	for _, l := range lines {
		if strings.Contains(l, " address: LID") || strings.HasPrefix(l, " GID: ") ||
			strings.HasPrefix(l, " #bytes") {
			block = append(block, l)
		}
	}
	return block
}

// perftestValues stands for the values two runs of the same role print
// differently: QPNs, PSNs, keys, addresses, GID bytes.
var perftestValues = regexp.MustCompile(`(QPN|PSN|RKey|VAddr|OUT) (0x[0-9a-f]+|0+)|GID: [0-9:]+`)

func normalizeHeader(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, perftestValues.ReplaceAllStringFunc(l, func(m string) string {
			if strings.HasPrefix(m, "GID") {
				return "GID: <gid>"
			}
			return strings.Fields(m)[0] + " <v>"
		}))
	}
	return out
}

// perftestBareNumber is a line of --output=bandwidth|message_rate|latency.
var perftestBareNumber = regexp.MustCompile(`(?m)^-?[0-9]+\.[0-9]+$`)

// cBareNumber is such a line from C, which also prints "inf" when it
// could not measure its cycle counter's rate (on arm64 under TCG it
// samples the counter against gettimeofday and, on a loaded machine,
// warns "Correlation coefficient r^2: ... < 0.9" and divides by zero); the
// Go tool reads the monotonic clock and has no such case.
var cBareNumber = regexp.MustCompile(`(?m)^(-?[0-9]+\.[0-9]+|inf)$`)

// The Go tool prints the header block, address lines and table header of
// the C tool started with the same options in the same role (server on
// rxe0, client on rxe1) line by line, only the values that differ
// between any two runs (QPN, PSN, keys, addresses, GIDs) masked; with
// --output it prints, like C, one bare number per result and nothing
// else on stdout. Both directions run once per case: the Go server's
// output is compared with the C server's of the other direction, and
// likewise the clients'.
//
// The header is compared only against the C perftest the Go tool mirrors
// (Debian 12's 4.5, version 6.06): Debian 13's 25.01 (6.24, on 6.12) adds
// "Lock-free" and "Using DDP" columns and prints MiB/sec, and the Go tool
// does not follow it there (its wire is the same, TestPerftestInterop*).
func TestPerftestOutputMatchesC(t *testing.T) {
	sameVersion := cPerftestVersion(t) == goPerftestVersion
	for _, c := range []struct {
		tool string
		args []string
	}{
		{"ib_send_bw", []string{"-s", "1024", "-n", "100"}},
		{"ib_send_bw", []string{"-b", "-q", "2", "-s", "1024", "-n", "100"}},
		{"ib_send_bw", []string{"-c", "UD", "-s", "512", "-n", "100"}},
		{"ib_write_bw", []string{"-s", "4096", "-n", "100"}},
		{"ib_write_bw", []string{"-R", "-s", "4096", "-n", "100"}},
		{"ib_read_lat", []string{"-R", "-n", "100"}},
		{"ib_send_lat", []string{"-R", "-c", "UD", "-n", "100"}},
		{"ib_send_bw", []string{"-R", "-b", "-c", "UD", "-q", "2", "-s", "512", "-n", "100"}},
		{"ib_read_bw", []string{"-o", "4", "-e", "-s", "1024", "-n", "100"}},
		{"ib_atomic_bw", []string{"-A", "CMP_AND_SWAP", "-n", "100"}},
		{"ib_send_lat", []string{"-n", "100"}},
		{"ib_write_lat", []string{"-c", "UC", "-n", "100"}},
		{"ib_read_lat", []string{"-n", "100"}},
		{"ib_atomic_lat", []string{"-n", "100"}},
		{"ib_write_bw", []string{"--output=bandwidth", "-s", "1024", "-n", "100"}},
		{"ib_send_bw", []string{"--output=message_rate", "-s", "1024", "-n", "100"}},
		{"ib_send_lat", []string{"--output=latency", "-n", "100"}},
		{"ib_read_lat", []string{"--output=latency", "-n", "100"}},
	} {
		t.Run(c.tool+" "+strings.Join(c.args, " "), func(t *testing.T) {
			var src []string
			if slices.Contains(c.args, "-R") {
				src = []string{"--source_ip", "10.99.0.2"}
			}
			goSrv, cCli := outputPair(t, perftestEnd{goTool: true}, perftestEnd{}, c.tool, src, c.args)
			cSrv, goCli := outputPair(t, perftestEnd{}, perftestEnd{goTool: true}, c.tool, src, c.args)
			for _, role := range []struct{ name, goOut, cOut string }{{"server", goSrv, cSrv}, {"client", goCli, cCli}} {
				if slices.ContainsFunc(c.args, func(a string) bool { return strings.HasPrefix(a, "--output") }) {
					g, cn := perftestBareNumber.FindAllString(role.goOut, -1), cBareNumber.FindAllString(role.cOut, -1)
					if len(g) != len(cn) || strings.Contains(role.goOut, "#bytes") || strings.Contains(role.goOut, "Dual-port") {
						t.Errorf("%s: Go printed %q, C %q\n--- Go\n%s\n--- C\n%s", role.name, g, cn, role.goOut, role.cOut)
					}
					t.Logf("%s: Go %q, C %q", role.name, g, cn)
					continue
				}
				g, cl := normalizeHeader(perftestHeaderBlock(role.goOut)), normalizeHeader(perftestHeaderBlock(role.cOut))
				if len(cl) == 0 {
					t.Fatalf("%s: no header block from C:\n%s", role.name, role.cOut)
				}
				if len(g) == 0 {
					t.Errorf("%s: no header block from Go:\n%s", role.name, role.goOut)
				}
				if !sameVersion {
					t.Logf("%s: header not compared: the C perftest is %s, the Go tool mirrors %s", role.name, cPerftestVersion(t), goPerftestVersion)
					continue
				}
				if diff := lineDiff(cl, g); diff != "" {
					t.Errorf("%s: the Go header differs from C's (- C, + Go):\n%s", role.name, diff)
				}
			}
		})
	}
}

// outputPair runs one direction of a case and returns the server's and the
// client's output; over UC or UD, a stall on a packet rxe lost (lossWatch)
// runs the pair once more.
func outputPair(t *testing.T, srv, cli perftestEnd, tool string, src, args []string) (string, string) {
	t.Helper()
	for try := 0; ; try++ {
		w := watchLoss(t)
		so, co, err := tryPerftestPair(t, srv, cli, tool, src, args...)
		if err == nil {
			return so, co
		}
		if !unreliable(args) {
			t.Fatal(err)
		}
		why, lost := w.lost(t, err.Error())
		if !lost || try > 0 {
			t.Fatalf("%v\n(%s)", err, why)
		}
		t.Logf("%s, and an end stalled: a packet lost on a transport that does not retransmit; running the pair again", why)
	}
}

// goPerftestVersion is the perftest version tools/perftest announces and
// whose output it prints (Debian 12's perftest 4.5).
const goPerftestVersion = "6.06"

// cPerftestVersion is the version the image's C perftest reports (-V).
func cPerftestVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ib_send_bw", "-V").CombinedOutput()
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "Version: ")
	if !ok {
		t.Fatalf("ib_send_bw -V: %v\n%s", err, out)
	}
	return v
}

// lineDiff lists the lines where want and got differ, position by
// position.
func lineDiff(want, got []string) string {
	var b strings.Builder
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			fmt.Fprintf(&b, "-%q\n+%q\n", w, g)
		}
	}
	return b.String()
}
