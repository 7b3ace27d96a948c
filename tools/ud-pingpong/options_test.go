package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ibv_ud_pingpong's defaults (rdma-core v44's main()): 1024-byte messages,
// no -m.
func TestDefaultsAreCs(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := options{port: 18515, ibPort: 1, size: 1024, rxDepth: 500, iters: 1000, gidIndex: -1}
	if diff := cmp.Diff(want, o, cmp.AllowUnexported(options{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if qkey != 0x11111111 || grhLen != 40 || hopLimit != 1 {
		t.Errorf("Q_Key %#x, GRH area %d, hop limit %d", qkey, grhLen, hopLimit)
	}
}

func TestParseOptions(t *testing.T) {
	want := defaultOptions()
	want.gidIndex, want.size, want.iters, want.rxDepth, want.port, want.events, want.validate, want.server = 1, 512, 9, 2, 18724, true, true, "h"
	got, err := parseOptions([]string{"-g1", "--size=512", "-n", "9", "-r", "2", "-p", "18724", "-ec", "h"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(options{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, args := range [][]string{{"-m", "1024"}, {"a", "b"}, {"--mtu=1024"}} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	var out, errOut bytes.Buffer
	if run([]string{"ud-pingpong", "-m", "1024"}, &out, &errOut) != 1 || !strings.Contains(out.String(), "(default 2048)") ||
		strings.Contains(out.String(), "--mtu") {
		t.Errorf("-m: stdout %q stderr %q", out.String(), errOut.String())
	}
}
