package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// ibv_uc_pingpong's defaults (rdma-core v44's main()).
func TestDefaultsAreCs(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := options{port: 18515, ibPort: 1, size: 4096, mtu: uverbs.MTU1024, rxDepth: 500, iters: 1000, gidIndex: -1}
	if diff := cmp.Diff(want, o, cmp.AllowUnexported(options{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		set  func(*options)
	}{
		{[]string{"-g", "1", "-s", "8192", "-n", "200", "-m", "256", "-p", "18710", "-d", "rxe1", "10.99.0.1"}, func(o *options) {
			o.gidIndex, o.size, o.iters, o.mtu, o.port, o.ibDev, o.server = 1, 8192, 200, uverbs.MTU256, 18710, "rxe1", "10.99.0.1"
		}},
		{[]string{"10.99.0.1", "-ecg1", "--rx=3", "--sl=2", "-i", "0x1"}, func(o *options) {
			o.server, o.events, o.validate, o.gidIndex, o.rxDepth, o.sl, o.ibPort = "10.99.0.1", true, true, 1, 3, 2, 1
		}},
	} {
		want := defaultOptions()
		tc.set(&want)
		got, err := parseOptions(tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(options{})); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}

// What ibv_uc_pingpong refuses: a path MTU that is not one, a surplus
// operand, a port past 65535, an option it does not have (rc's -o).
func TestParseOptionsErrors(t *testing.T) {
	for _, args := range [][]string{{"-m", "1500"}, {"a", "b"}, {"-p", "70000"}, {"-o"}, {"-s"}} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	if _, err := parseOptions([]string{"-m", "1500"}); !errors.Is(err, pp.ErrUsage) {
		t.Errorf("-m 1500: %v, want ErrUsage", err)
	}
	var out, errOut bytes.Buffer
	if run([]string{"uc-pingpong", "-x"}, &out, &errOut) != 1 || !strings.Contains(out.String(), "-m, --mtu=<size>       path MTU (default 1024)") ||
		!strings.Contains(errOut.String(), "invalid option -- 'x'") {
		t.Errorf("-x: stdout %q stderr %q", out.String(), errOut.String())
	}
}
