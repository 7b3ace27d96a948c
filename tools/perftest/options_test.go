package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/qp"
)

func parseFor(t *testing.T, name string, args ...string) (*options, error) {
	t.Helper()
	tt, ok := testByName(name)
	if !ok {
		t.Fatalf("no test %s", name)
	}
	var out bytes.Buffer
	return parseOptions(tt, args, &out)
}

// perftest 4.5's defaults per tool, after force_dependecies.
func TestOptionDefaults(t *testing.T) {
	for _, c := range []struct {
		name                       string
		args                       []string
		size, iters, tx, rx, cqMod int
		noPeak                     bool
	}{
		{"ib_send_bw", nil, 65536, 1000, 128, 512, 1, true},               // server: no peak; 64 KiB > 8 KiB: CQ moderation off
		{"ib_send_bw", []string{"host"}, 65536, 1000, 128, 512, 1, false}, // client
		{"ib_write_bw", []string{"host"}, 65536, 5000, 128, 1, 1, false},
		{"ib_write_bw", []string{"-s", "64", "host"}, 64, 5000, 128, 1, 100, false},
		{"ib_read_bw", []string{"-n", "50", "-s", "4K", "host"}, 4096, 50, 50, 1, 50, false},
		{"ib_atomic_bw", []string{"host"}, 8, 1000, 128, 1, 100, false},
		{"ib_send_lat", nil, 2, 1000, 1, 512, 1, false},
		{"ib_write_lat", nil, 2, 1000, 1, 1, 1, false},
		{"ib_send_bw", []string{"-n", "30000", "-s", "64", "host"}, 64, 30000, 128, 512, 100, true}, // above 20 000 iterations
		{"ib_send_bw", []string{"-c", "UC", "-n", "300", "host"}, 65536, 300, 128, 300, 1, false},
		{"ib_send_bw", []string{"-n", "5", "host"}, 65536, 5, 5, 6, 1, false}, // rx_depth 5, made even
		{"ib_send_bw", []string{"-a", "host"}, maxSize, 1000, 128, 512, 100, false},
	} {
		o, err := parseFor(t, c.name, c.args...)
		if err != nil {
			t.Fatalf("%s %v: %v", c.name, c.args, err)
		}
		if o.size != c.size || o.iters != c.iters || o.txDepth != c.tx || o.rxDepth != c.rx || o.cqMod != c.cqMod || o.noPeak != c.noPeak {
			t.Errorf("%s %v: size %d iters %d tx %d rx %d cq_mod %d noPeak %v; want %d %d %d %d %d %v", c.name, c.args,
				o.size, o.iters, o.txDepth, o.rxDepth, o.cqMod, o.noPeak, c.size, c.iters, c.tx, c.rx, c.cqMod, c.noPeak)
		}
	}
	o, _ := parseFor(t, "ib_send_bw", "-c", "UD", "-D", "8", "host")
	if o.conn != qp.UD || o.duration != 8 || o.margin != 2 || !o.noPeak {
		t.Errorf("-c UD -D 8: %+v", o)
	}
}

// perftest's refusals, worded as it words them.
func TestOptionRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"ib_read_bw", []string{"-c", "UC"}, "UC connection not possible in READ/ATOMIC verbs"},
		{"ib_atomic_lat", []string{"-c", "UC"}, "UC connection not possible in READ/ATOMIC verbs"},
		{"ib_write_bw", []string{"-c", "UD"}, "UD connection only possible in SEND verb"},
		{"ib_send_bw", []string{"-c", "XYZ"}, "Invalid Connection type"},
		{"ib_send_lat", []string{"-q", "2"}, "Multiple QPs only available on bw tests"},
		{"ib_send_lat", []string{"-b"}, "Bidirectional is only available in BW test"},
		{"ib_write_bw", []string{"-e"}, "Events feature not available on WRITE verb"},
		{"ib_read_bw", []string{"-I", "64"}, "Inline feature not available on READ/Atomic verbs"},
		{"ib_send_bw", []string{"-o", "4"}, "Setting Outstanding reads only available on READ verb"},
		{"ib_write_bw", []string{"-r", "8"}, "On RDMA verbs rx depth can be only 1"},
		{"ib_send_bw", []string{"-A", "FETCH_AND_ADD"}, "You are not running the atomic_lat/bw test!"},
		{"ib_atomic_bw", []string{"-A", "SWAP"}, "Invalid Atomic type!"},
		{"ib_send_bw", []string{"-n", "3"}, "Iteration num should be between 5 and 100000000"},
		{"ib_send_bw", []string{"-D", "2", "-e"}, "Duration mode doesn't work with events."},
		{"ib_send_bw", []string{"-D", "2", "-a"}, "Duration mode currently doesn't support running on all sizes."},
		{"ib_send_lat", []string{"--run_infinitely"}, "run_infinitely exists only in BW tests for now."},
		{"ib_send_bw", []string{"-l", "3", "-n", "100"}, "Number of iterations must be a multiple of post list size"},
		{"ib_send_bw", []string{"-s", "0"}, "Message Size should be between 1 and"},
		{"ib_send_bw", []string{"-n", "abc"}, "Iteration num argument abc should be int"},
		{"ib_send_bw", []string{"--bogus"}, "unrecognized option '--bogus'"},
	} {
		_, err := parseFor(t, c.name, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want %q", c.name, c.args, err, c.want)
		}
	}
	// Refusals perftest explains on stdout and exits 1 for.
	for _, args := range [][]string{{"-R", "-c", "UC"}} {
		if _, err := parseFor(t, "ib_send_bw", args...); !errors.Is(err, errExit) {
			t.Errorf("ib_send_bw %v: %v, want the UC/rdma_cm refusal", args, err)
		}
	}
	// -R takes UD (over RDMA CM's UDP port space) and more than one QP,
	// RC or UD (one CM connection each, as C perftest).
	if _, err := parseFor(t, "ib_send_lat", "-R", "-c", "UD"); err != nil {
		t.Errorf("ib_send_lat -R -c UD: %v", err)
	}
	for _, c := range [][]string{
		{"ib_send_bw", "-R", "-q", "2"}, {"ib_write_bw", "-R", "-q", "2"}, {"ib_read_bw", "-R", "-q", "2"},
		{"ib_send_bw", "-R", "-q", "2", "-c", "UD"}, {"ib_send_bw", "-R", "-b", "-q", "3", "-c", "UD"},
	} {
		o, err := parseFor(t, c[0], c[1:]...)
		if err != nil || o.numQPs < 2 || !o.rdmaCM || !o.commRDMACM {
			t.Errorf("%v: %v, want its QPs over RDMA CM", c, err)
		}
	}
	if _, err := parseFor(t, "ib_atomic_bw", "-s", "64"); !errors.Is(err, errExit) {
		t.Errorf("ib_atomic_bw -s 64: %v, want a refusal", err)
	}
}

// The program picks its test from argv[0] or from its first argument.
func TestTestSelection(t *testing.T) {
	var out, errOut bytes.Buffer
	if st := run([]string{"/usr/bin/ib_write_lat", "-V"}, &out, &errOut); st != 0 || out.String() != "Version: 6.06\n" {
		t.Fatalf("ib_write_lat -V: status %d, %q %q", st, out.String(), errOut.String())
	}
	out.Reset()
	if st := run([]string{"perftest", "ib_read_bw", "-h"}, &out, &errOut); st != 0 || !strings.Contains(out.String(), "ib_read_bw <host>") {
		t.Fatalf("perftest ib_read_bw -h: status %d, %q", st, out.String())
	}
	errOut.Reset()
	if st := run([]string{"perftest", "ib_foo_bw"}, &out, &errOut); st != 1 || !strings.Contains(errOut.String(), "unknown test") {
		t.Fatalf("perftest ib_foo_bw: status %d, %q", st, errOut.String())
	}
}
