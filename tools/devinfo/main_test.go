package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// -i is read like strtol(optarg, NULL, 0).
func TestStrtol0(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "0x10": 16, "010": 8, " 7": 7, "-3": -3, "2abc": 2, "abc": 0, "": 0, "0x": 0, "09": 0} {
		if got := strtol0(in); got != want {
			t.Errorf("strtol0(%q) = %d, want %d", in, got, want)
		}
	}
}

// The command-line errors need no device: a bad option or port prints the
// usage on stdout (the error on stderr) and exits 255 or 1, as ibv_devinfo.
func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"-x"}, 255, "prog: invalid option -- 'x'\n"},
		{[]string{"-i", "0"}, 1, ""},
		{[]string{"--ib-port=-2"}, 1, ""},
	} {
		var out, errOut bytes.Buffer
		if got := run("prog", tc.args, &out, &errOut); got != tc.status || errOut.String() != tc.stderr ||
			!strings.HasPrefix(out.String(), "Usage: prog             print the ca attributes\n") {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d, the usage, %q", tc.args, got, out.String(), errOut.String(), tc.status, tc.stderr)
		}
	}
}

// Without RDMA devices (this host): -l lists none, the rest fail as
// ibv_devinfo does.
func TestRunNoDevices(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband_verbs"); err == nil {
		t.Skip("this machine has RDMA devices")
	}
	var out, errOut bytes.Buffer
	if got := run("prog", []string{"-l"}, &out, &errOut); got != 0 || out.String() != "0 HCAs found:\n\n" {
		t.Errorf("-l: status %d, stdout %q", got, out.String())
	}
	out.Reset()
	if got := run("prog", nil, &out, &errOut); got != 255 || errOut.String() != "No IB devices found\n" {
		t.Errorf("no options: status %d, stderr %q", got, errOut.String())
	}
	errOut.Reset()
	if got := run("prog", []string{"-d", "rxe9"}, &out, &errOut); got != 255 || errOut.String() != "IB device 'rxe9' wasn't found\n" {
		t.Errorf("-d rxe9: status %d, stderr %q", got, errOut.String())
	}
}
