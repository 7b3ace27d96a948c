package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
)

// ibv_ud_pingpong's defaults (rdma-core v44's main()): 1024-byte messages,
// no -m; and its UD constants.
func TestDefaultsAreCs(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := options{Options: pp.Options{Port: 18515, IBPort: 1, Size: 1024, RxDepth: 500, Iters: 1000, GIDIndex: -1}}
	if diff := cmp.Diff(want, o, cmp.AllowUnexported(options{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if qkey != 0x11111111 || grhLen != 40 || hopLimit != 1 {
		t.Errorf("Q_Key %#x, GRH area %d, hop limit %d", qkey, grhLen, hopLimit)
	}
}

// Every one of ibv_ud_pingpong's options; -m, which it lacks, and -s 0 are
// refused with the usage.
func TestParseOptions(t *testing.T) {
	want := options{
		Options:  pp.Options{Server: "h", Port: 18724, IBDev: "rxe1", IBPort: 2, Size: 512, RxDepth: 2, Iters: 9, SL: 3, Events: true, GIDIndex: 1},
		validate: true,
	}
	got, err := parseOptions([]string{"-g1", "--size=512", "-n", "9", "-r", "2", "-p", "18724", "-ec", "h", "--ib-dev=rxe1", "-i", "2", "--sl", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(options{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, args := range [][]string{{"-m", "1024"}, {"a", "b"}, {"--mtu=1024"}, {"-s", "0"}} {
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
