package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

func TestDefaultsAreCs(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := options{Options: pp.Options{Port: 18515, IBPort: 1, Size: 4096, RxDepth: 500, Iters: 1000, GIDIndex: -1}, mtu: uverbs.MTU1024}
	if diff := cmp.Diff(want, o, cmp.AllowUnexported(options{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		set  func(*options)
	}{
		{[]string{"-g", "1", "-s", "2048", "-n", "200", "-p", "18600", "-d", "rxe1", "10.99.0.1"}, func(o *options) {
			o.GIDIndex, o.Size, o.Iters, o.Port, o.IBDev, o.Server = 1, 2048, 200, 18600, "rxe1", "10.99.0.1"
		}},
		// getopt permutes: the host may come first; arguments may be attached.
		{[]string{"10.99.0.1", "-s65536", "-m", "1024", "-r16", "-e"}, func(o *options) {
			o.Server, o.Size, o.mtu, o.RxDepth, o.Events = "10.99.0.1", 65536, uverbs.MTU1024, 16, true
		}},
		// Bundles, with the argument of the last letter attached or next.
		{[]string{"-ecg1", "-eg", "2"}, func(o *options) { o.Events, o.validate, o.GIDIndex = true, true, 2 }},
		// Long names, "=" or separate, and unambiguous prefixes.
		{[]string{"--size=100", "--iters", "7", "--ev", "--gid-idx=1", "--rx=3", "--ib-port", "2", "--sl=5", "--mtu=4096"}, func(o *options) {
			o.Size, o.Iters, o.Events, o.GIDIndex, o.RxDepth, o.IBPort, o.SL, o.mtu = 100, 7, true, 1, 3, 2, 5, uverbs.MTU4096
		}},
		// strtol base 0.
		{[]string{"-p", "0x4853", "-s", "010"}, func(o *options) { o.Port, o.Size = 0x4853, 8 }},
		{[]string{"-o", "-t", "--chk", "-N"}, func(o *options) { o.odp, o.ts, o.validate = true, true, true }},
		{[]string{"-m", "256", "--", "-host"}, func(o *options) { o.mtu, o.Server = uverbs.MTU256, "-host" }},
		{[]string{"-"}, func(o *options) { o.Server = "-" }},
		// ibv_rc_pingpong alone takes -s 0 and -r 0.
		{[]string{"-s", "0", "-r", "0"}, func(o *options) { o.Size, o.RxDepth = 0, 0 }},
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

func TestParseOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" means pp.ErrUsage
	}{
		{[]string{"-p", "65536"}, ""},
		{[]string{"-i", "0"}, ""},
		{[]string{"-m", "1500"}, ""},
		{[]string{"-m", "0"}, ""},
		{[]string{"-s", "12k"}, ""},
		{[]string{"-n", "-1"}, ""},
		{[]string{"a", "b"}, ""},
		{[]string{"-x"}, "invalid option -- 'x'"},
		{[]string{"-s"}, "option requires an argument -- 's'"},
		{[]string{"--size"}, "option '--size' requires an argument"},
		{[]string{"--events=1"}, "option '--events' doesn't allow an argument"},
		{[]string{"--bogus"}, "unrecognized option '--bogus'"},
		{[]string{"--i"}, "option '--i' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--iodp'"},
		{[]string{"-j"}, "-j: device memory is not supported by rxe"},
		{[]string{"-O"}, "-O: implicit on-demand paging and MR prefetch are not supported by rxe"},
	} {
		_, err := parseOptions(tc.args)
		switch {
		case err == nil:
			t.Errorf("%q: no error", tc.args)
		case tc.want == "" && !errors.Is(err, pp.ErrUsage):
			t.Errorf("%q: %v, want the usage", tc.args, err)
		case tc.want != "" && err.Error() != tc.want:
			t.Errorf("%q: %q, want %q", tc.args, err, tc.want)
		}
	}
}

func TestUsageErrorsPrintUsage(t *testing.T) {
	for _, args := range [][]string{{"rc-pingpong", "-m", "1500"}, {"rc-pingpong", "-x"}, {"rc-pingpong", "a", "b"}} {
		var stdout, stderr strings.Builder
		if rc := run(args, &stdout, &stderr); rc != 1 {
			t.Errorf("%q: exit %d, want 1", args, rc)
		}
		if !strings.HasPrefix(stdout.String(), "Usage:\n  rc-pingpong            start a server") {
			t.Errorf("%q: no usage on stdout:\n%s", args, stdout.String())
		}
	}
}
