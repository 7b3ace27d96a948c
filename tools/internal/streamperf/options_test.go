package streamperf

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

var (
	rstream   = Tool{Name: "rstream", Sockets: true}
	riostream = Tool{Name: "riostream"}
)

// The defaults are rstream.c's statics: 1 iteration of 1000 transfers of
// 1000 bytes (used only when -I, -C or -S makes the run custom), port
// 7471, inline 64, non-blocking.
func TestParseDefaults(t *testing.T) {
	o, err := rstream.Parse(nil, new(bytes.Buffer), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	want := &Options{Inline: 64, Iterations: 1, Count: 1000, Size: 1000, Port: "7471", DontWait: true}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("defaults %+v, want %+v", o, want)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		tool Tool
		args string
		want Options
	}{
		{rstream, "-s 10.99.0.1 -b 10.99.0.2 -S 4096 -C 100 -I 10 -T v -p 7600 -B 65536 -i 0 -k 30 -f ip",
			Options{Server: "10.99.0.1", Bind: "10.99.0.2", NumericHost: true, Buffer: 65536, Inline: 0, Iterations: 10,
				Count: 100, Size: 4096, Custom: true, Port: "7600", Keepalive: 30, DontWait: true, Verify: true}},
		// getopt(3) forms: attached arguments, operands ignored.
		{rstream, "-s10.99.0.1 -S65536 extra -Tb -Tv", Options{Server: "10.99.0.1", Inline: 64, Iterations: 1, Count: 1000,
			Size: 65536, Custom: true, Port: "7471", WaitAll: true, Verify: true}},
		// -S all is not a custom run; words match on their first letters,
		// any case; -T n after -T b keeps MSG_WAITALL as the C flags do.
		{rstream, "-S ALL -T Blocking -T nonblock -T sockets -T resolve -T asynchronous -T verify",
			Options{Inline: 64, Iterations: 1, Count: 1000, Size: 1000, AllSizes: true, Port: "7471",
				TCP: true, Async: true, DontWait: true, WaitAll: true, Resolve: true, Verify: true}},
		{rstream, "-T f -f name", Options{Inline: 64, Iterations: 1, Count: 1000, Size: 1000, Port: "7471", DontWait: true, TCP: true}},
		{riostream, "-s host -C 50 -I 5 -S 4096 -T b", Options{Server: "host", Inline: 64, Iterations: 5, Count: 50, Size: 4096,
			Custom: true, Port: "7471", WaitAll: true}},
		// atoi: trailing junk ignored, no digits is 0.
		{riostream, "-C 12x -I junk", Options{Inline: 64, Iterations: 0, Count: 12, Size: 1000, Custom: true, Port: "7471", DontWait: true}},
	} {
		o, err := tc.tool.Parse(strings.Fields(tc.args), new(bytes.Buffer), new(bytes.Buffer))
		if err != nil {
			t.Errorf("%s %s: %v", tc.tool.Name, tc.args, err)
			continue
		}
		if !reflect.DeepEqual(*o, tc.want) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", tc.tool.Name, tc.args, *o, tc.want)
		}
	}
}

// What the C tools refuse they answer with getopt's message on stderr
// and the usage on stdout; riostream has no -k and no -T s, f or r.
func TestParseRefused(t *testing.T) {
	for _, tc := range []struct {
		tool   Tool
		args   string
		stderr string
	}{
		{rstream, "-x", "rstream: invalid option -- 'x'\n"},
		{rstream, "-S", "rstream: option requires an argument -- 'S'\n"},
		{rstream, "-T q", ""},
		{rstream, "-T sock", ""},
		{riostream, "-k 5", "riostream: invalid option -- 'k'\n"},
		{riostream, "-T s", ""},
		{riostream, "-T resolve", ""},
		{riostream, "-T f", ""},
	} {
		var stdout, stderr bytes.Buffer
		_, err := tc.tool.Parse(strings.Fields(tc.args), &stdout, &stderr)
		if err != ErrUsage || stderr.String() != tc.stderr || !strings.HasPrefix(stdout.String(), "usage: "+tc.tool.Name+"\n") {
			t.Errorf("%s %s: %v, stderr %q, stdout %q", tc.tool.Name, tc.args, err, stderr.String(), stdout.String())
		}
	}
	var stderr bytes.Buffer
	if _, err := rstream.Parse([]string{"-f", "carrier-pigeon"}, new(bytes.Buffer), &stderr); err != nil || stderr.String() != "Warning: unknown address format\n" {
		t.Errorf("-f unknown: %v, %q", err, stderr.String())
	}
	if _, err := rstream.Parse([]string{"-f", "gid"}, new(bytes.Buffer), new(bytes.Buffer)); err == nil {
		t.Error("-f gid accepted; AF_IB is not supported")
	}
}

// The usage text, line for line as rstream.c and riostream.c print it.
func TestUsage(t *testing.T) {
	var b bytes.Buffer
	riostream.Usage(&b)
	want := "usage: riostream\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n\t    name, ip, ipv6, or gid\n" +
		"\t[-B buffer_size]\n\t[-i inline_size]\n\t[-I iterations]\n\t[-C transfer_count]\n\t[-S transfer_size or all]\n" +
		"\t[-p port_number]\n\t[-T test_option]\n\t    a|async - asynchronous operation (use poll)\n" +
		"\t    b|blocking - use blocking calls\n\t    n|nonblocking - use nonblocking calls\n\t    v|verify - verify data\n"
	if b.String() != want {
		t.Errorf("riostream usage:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	rstream.Usage(&b)
	want = "usage: rstream\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n\t    name, ip, ipv6, or gid\n" +
		"\t[-B buffer_size]\n\t[-i inline_size]\n\t[-I iterations]\n\t[-C transfer_count]\n\t[-S transfer_size or all]\n" +
		"\t[-p port_number]\n\t[-k keepalive_time]\n\t[-T test_option]\n\t    s|sockets - use standard tcp/ip sockets\n" +
		"\t    a|async - asynchronous operation (use poll)\n\t    b|blocking - use blocking calls\n" +
		"\t    f|fork - fork server processing\n\t    n|nonblocking - use nonblocking calls\n" +
		"\t    r|resolve - use rdma cm to resolve address\n\t    v|verify - verify data\n"
	if b.String() != want {
		t.Errorf("rstream usage:\n%s\nwant\n%s", b.String(), want)
	}
}

func TestAtoi(t *testing.T) {
	for in, want := range map[string]int{"42": 42, " -7": -7, "+3": 3, "12ab": 12, "ab": 0, "": 0,
		"4294967296": 0, "2147483648": -2147483648, "99999999999999999999": -1} {
		if got := Atoi(in); got != want {
			t.Errorf("Atoi(%q) = %d, want %d", in, got, want)
		}
	}
}
