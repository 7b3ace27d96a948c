package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	o, err := parseOptions(strings.Fields("-c -I 10.99.0.2 -a 10.99.0.1 -p 7175 -S 65535 -C 50 -V -v -d -q"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.client || o.server || o.source != "10.99.0.2" || o.addr != "10.99.0.1" || o.port != 7175 || o.size != 65535 ||
		o.count != 50 || !o.validate || !o.verbose || !o.debug || !o.selfQP {
		t.Errorf("parsed %+v", o)
	}
	o, err = parseOptions([]string{"-s"}, io.Discard)
	if err != nil || o.port != defaultPort || o.size != defaultSize || o.count != 0 {
		t.Errorf("defaults %+v, %v", o, err)
	}
	for _, bad := range []string{"-s -c", "", "-c", "-s -S 25", "-s -S 65536", "-s -C -1", "-s extra"} {
		if _, err := parseOptions(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
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
