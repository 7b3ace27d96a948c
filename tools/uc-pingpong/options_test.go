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

// ibv_uc_pingpong's defaults (rdma-core v44's main()) and every one of its
// options, short and long.
func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want options
	}{
		{nil, options{Options: pp.Options{Port: 18515, IBPort: 1, Size: 4096, RxDepth: 500, Iters: 1000, GIDIndex: -1}, mtu: uverbs.MTU1024}},
		{[]string{"-g", "1", "-s", "8192", "-n", "200", "-m", "256", "-p", "18710", "-d", "rxe1", "10.99.0.1"}, options{
			Options: pp.Options{Server: "10.99.0.1", Port: 18710, IBDev: "rxe1", IBPort: 1, Size: 8192, RxDepth: 500, Iters: 200, GIDIndex: 1},
			mtu:     uverbs.MTU256,
		}},
		{[]string{"10.99.0.1", "-ecg1", "--rx=3", "--sl=2", "-i", "0x2", "--mtu=4096"}, options{
			Options:  pp.Options{Server: "10.99.0.1", Port: 18515, IBPort: 2, Size: 4096, RxDepth: 3, Iters: 1000, SL: 2, Events: true, GIDIndex: 1},
			mtu:      uverbs.MTU4096,
			validate: true,
		}},
		{[]string{"--port=1", "--ib-dev", "d", "--ib-port=3", "--size=1", "--iters=0", "--events", "--gid-idx=0", "--chk"}, options{
			Options:  pp.Options{Port: 1, IBDev: "d", IBPort: 3, Size: 1, RxDepth: 500, Iters: 0, Events: true, GIDIndex: 0},
			mtu:      uverbs.MTU1024,
			validate: true,
		}},
	} {
		got, err := parseOptions(tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
		} else if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(options{})); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}

// What ibv_uc_pingpong refuses: a path MTU that is not one, a surplus
// operand, a port past 65535, an option it does not have (rc's -o), -s 0.
func TestParseOptionsErrors(t *testing.T) {
	for _, args := range [][]string{{"-m", "1500"}, {"a", "b"}, {"-p", "70000"}, {"-o"}, {"-s"}, {"-s", "0"}} {
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
