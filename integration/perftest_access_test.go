//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// perftest's C clients as judges of Go-registered memory: ib_write_bw,
// ib_read_bw and ib_atomic_bw (rxe1) run against an MR the Go side
// registered on rxe0 behind a Go QP that grants every remote access. Where
// the MR grants the operation the client completes and (for writes) the
// bytes land inside the addressed range only; where it does not, the C
// client reports a completion error and the memory is untouched.
func TestPerftestClientsAgainstGoMRAccess(t *testing.T) {
	lw := uverbs.AccessLocalWrite
	const size = "4096"
	for _, c := range []struct {
		name   string
		access uverbs.Access
		ok     bool
		tool   string
		args   []string
	}{
		{"write granted", lw | uverbs.AccessRemoteWrite, true, "ib_write_bw", []string{"-s", size, "-n", "100"}},
		{"write refused", lw | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic, false, "ib_write_bw", []string{"-s", size, "-n", "100"}},
		{"read granted", lw | uverbs.AccessRemoteRead, true, "ib_read_bw", []string{"-s", size, "-n", "100"}},
		{"read refused", lw | uverbs.AccessRemoteWrite | uverbs.AccessRemoteAtomic, false, "ib_read_bw", []string{"-s", size, "-n", "100"}},
		{"atomic refused", lw | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead, false, "ib_atomic_bw", []string{"-A", "FETCH_AND_ADD", "-n", "100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := openEnd(t, devices(t, 1)[0], endOpts{})
			target := extraMR(t, e, 2*cycle, c.access)
			mem := target.Buffer().Bytes()
			for i := range mem {
				mem[i] = 0x5a
			}
			out := servePerftest(t, e, target, c.ok, c.tool, c.args...)
			if !c.ok {
				line := ""
				lines := strings.Split(out, "\n")
				for i, l := range lines {
					if strings.Contains(l, "Completion with error") {
						line = strings.TrimSpace(l)
						if i+1 < len(lines) {
							line += " | " + strings.TrimSpace(lines[i+1])
						}
						break
					}
				}
				if line == "" {
					t.Fatalf("%s failed without a completion error:\n%s", c.tool, out)
				}
				t.Logf("%s: %s", c.tool, line)
				if !allBytes(mem, 0x5a) {
					t.Fatal("a refused client changed Go's memory")
				}
				return
			}
			t.Logf("%s: %s", c.tool, strings.TrimSpace(perftestLine.FindString(out)))
			if !allBytes(mem[cycle:], 0x5a) {
				t.Fatal("the client touched memory past the range it addresses")
			}
			changed := 0
			for _, b := range mem[:cycle] {
				if b != 0x5a {
					changed++
				}
			}
			switch {
			case c.tool == "ib_write_bw" && changed < cycle*9/10:
				t.Fatalf("ib_write_bw (random payload) changed only %d of %d bytes", changed, cycle)
			case c.tool == "ib_read_bw" && changed != 0:
				t.Fatalf("ib_read_bw changed %d bytes", changed)
			}
		})
	}
}
