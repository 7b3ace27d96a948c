package main

import (
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	o, err := parseOptions(strings.Fields("-c -I 10.99.0.2 -a 10.99.0.1 -p 7175 -S 65535 -C 50 -V -v -d -q"))
	if err != nil {
		t.Fatal(err)
	}
	if !o.client || o.server || o.source != "10.99.0.2" || o.addr != "10.99.0.1" || o.port != 7175 || o.size != 65535 ||
		o.count != 50 || !o.validate || !o.verbose || !o.debug || !o.selfQP {
		t.Errorf("parsed %+v", o)
	}
	o, err = parseOptions([]string{"-s"})
	if err != nil || o.port != defaultPort || o.size != defaultSize || o.count != 0 {
		t.Errorf("defaults %+v, %v", o, err)
	}
	for _, bad := range []string{"-s -c", "", "-c", "-s -S 25", "-s -S 65536", "-s -C -1", "-s extra", "-s -x", "-s -S", "-s -S abc"} {
		if _, err := parseOptions(strings.Fields(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Options bundle and take attached arguments as C rping's getopt(3)
// parses them.
func TestParseOptionsGetopt(t *testing.T) {
	o, err := parseOptions(strings.Fields("-cvVdq -a10.99.0.1 -I10.99.0.2 -S65535 -C7 -p7600"))
	if err != nil {
		t.Fatal(err)
	}
	if !o.client || !o.verbose || !o.validate || !o.debug || !o.selfQP || o.addr != "10.99.0.1" ||
		o.source != "10.99.0.2" || o.size != 65535 || o.count != 7 || o.port != 7600 {
		t.Errorf("parsed %+v", o)
	}
	o, err = parseOptions(strings.Fields("-svS 100 -C 3x"))
	if err != nil || !o.server || !o.verbose || o.size != 100 || o.count != 3 {
		t.Errorf("-svS 100 -C 3x: %+v, %v; want the size 100 and atoi's 3", o, err)
	}
	if _, err := parseOptions(strings.Fields("-sx")); err == nil || err.Error() != "invalid option -- 'x'" {
		t.Errorf("-sx: %v, want getopt's invalid option", err)
	}
}

func TestAtoi(t *testing.T) {
	for in, want := range map[string]int{"42": 42, " -7": -7, "+3": 3, "12ab": 12, "ab": 0, "": 0, "99999999999999999999": 0} {
		if got := atoi(in); got != want {
			t.Errorf("atoi(%q) = %d, want %d", in, got, want)
		}
	}
}

// The client's pattern is rping's: "rdma-ping-N: ", then letters from
// start cycling A..z, and a NUL last.
func TestFill(t *testing.T) {
	b := make([]byte, 30)
	fill(b, 7, 'y')
	if got, want := string(b), "rdma-ping-7: yzABCDEFGHIJKLMN\x00"; got != want {
		t.Errorf("fill = %q, want %q", got, want)
	}
}
