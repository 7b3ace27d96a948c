package abicheck

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// outcome is what Check did to a test: skipped, failed, or neither.
type outcome struct {
	testing.TB
	skipped, failed []string
}

func (o *outcome) Helper() {}
func (o *outcome) Errorf(format string, args ...any) {
	o.failed = append(o.failed, fmt.Sprintf(format, args...))
}
func (o *outcome) Fatalf(format string, args ...any) {
	o.Errorf(format, args...)
	runtime.Goexit()
}
func (o *outcome) Fatal(args ...any) {
	o.failed = append(o.failed, fmt.Sprint(args...))
	runtime.Goexit()
}
func (o *outcome) Skipf(format string, args ...any) {
	o.skipped = append(o.skipped, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (o *outcome) Failed() bool { return len(o.failed) > 0 }

// checkOutcome runs Check as a test of its own would and says what it did.
func checkOutcome(t *testing.T, headers []string, pins []Pin) *outcome {
	o := &outcome{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(o, headers, pins)
	}()
	<-done
	return o
}

// grown is a Go type with a member that the test's old header
// (rdma/old.h) lacks: the header is from before its struct grew it.
type grown struct {
	A uint32
	B uint32
}

// Headers that are older than the Go types fail the pins when they were
// chosen (PUREVERBS_UAPI_INCLUDE, as make unit sets it), and skip them with
// a message naming what they lack when they are merely what the machine
// has: go test ./uverbs used to fail on a host with an older
// linux-libc-dev. Missing headers likewise.
func TestStaleHeaders(t *testing.T) {
	if _, err := os.Stat("/usr/bin/gcc"); err != nil {
		t.Skip("no gcc")
	}
	cache := t.TempDir()
	inc := filepath.Join(cache, "uapi", "trixie", "usr", "include")
	for name, text := range map[string]string{
		"rdma/ib_user_verbs.h": "",
		"rdma/old.h":           "struct grown { unsigned int a; };\n",
	} {
		p := filepath.Join(inc, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pins := []Pin{{C: "struct grown", Go: reflect.TypeFor[grown]()}}
	missing := []Pin{{C: "struct nowhere", Go: reflect.TypeFor[grown]()}}

	t.Setenv("RXEVM_CACHE", cache) // found, not chosen
	t.Setenv(EnvInclude, "")
	for _, c := range []struct {
		name    string
		headers []string
		pins    []Pin
		want    string
	}{
		{"a member the header lacks", []string{"rdma/old.h"}, pins, `no C member "B"`},
		{"a struct the header lacks", []string{"rdma/old.h"}, missing, "struct nowhere is not defined"},
		{"a header that is not there", []string{"rdma/new.h"}, pins, "no rdma/new.h"},
	} {
		o := checkOutcome(t, c.headers, c.pins)
		if len(o.failed) > 0 || len(o.skipped) != 1 || !strings.Contains(o.skipped[0], c.want) {
			t.Errorf("found headers, %s: failed %q, skipped %q; want a skip naming %q", c.name, o.failed, o.skipped, c.want)
		}
	}

	t.Setenv(EnvInclude, inc) // chosen
	for _, c := range []struct {
		name    string
		headers []string
		pins    []Pin
		want    string
	}{
		{"a member the header lacks", []string{"rdma/old.h"}, pins, `no C member "B"`},
		{"a header that is not there", []string{"rdma/new.h"}, pins, "no rdma/new.h"},
	} {
		o := checkOutcome(t, c.headers, c.pins)
		if len(o.skipped) > 0 || len(o.failed) == 0 || !strings.Contains(strings.Join(o.failed, "\n"), c.want) {
			t.Errorf("chosen headers, %s: failed %q, skipped %q; want a failure naming %q", c.name, o.failed, o.skipped, c.want)
		}
	}
}
