package benchmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var meta = Meta{Commit: "0123abcd", Kernel: "6.1.0-57-amd64", Mode: "TCG, amd64, 2 vCPUs", Date: "2026-12-06"}

const table = "| a | b |\n|---|---|\n| 1 | 2 |\n"

func TestSection(t *testing.T) {
	got, err := Section("perftest", meta, table)
	if err != nil {
		t.Fatal(err)
	}
	want := "<!-- bench:perftest begin -->\n" +
		"Measured on commit 0123abcd, kernel 6.1.0-57-amd64, TCG, amd64, 2 vCPUs, 2026-12-06.\n\n" +
		table +
		"<!-- bench:perftest end -->\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Section (-want +got):\n%s", diff)
	}
	if got, _ := Section("x", Meta{}, table); !strings.Contains(got, "commit unknown, kernel unknown, unknown, unknown.") {
		t.Errorf("empty meta: %q, want every field unknown", got)
	}
	for _, bad := range []string{"", "a b", "x-->", "né"} {
		if _, err := Section(bad, meta, table); err == nil {
			t.Errorf("Section(%q) accepted the name", bad)
		}
	}
	if _, err := Section("x", meta, "<!-- bench:y end -->"); err == nil {
		t.Error("Section accepted a table holding a marker")
	}
}

// A section printed by a test comes back out of the run's output whole,
// among other lines and with a serial console's carriage returns, and
// splices into a README between its markers, leaving the rest as it was.
func TestRoundTrip(t *testing.T) {
	sec, err := Section("server", meta, table)
	if err != nil {
		t.Fatal(err)
	}
	output := "=== RUN   TestRoCEv2ReceiverBench\n    bench_test.go:1: round 1\r\n" +
		strings.ReplaceAll(sec, "\n", "\r\n") + "SERVER-RATIO size=64 go=1 c=1 ratio=1.000\n--- PASS: TestRoCEv2ReceiverBench\n"
	got, err := Extract(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"server": sec}, got); diff != "" {
		t.Fatalf("Extract (-want +got):\n%s", diff)
	}
	readme := "# rocev2-server\n\nRegenerate with make bench-server.\n\n<!-- bench:server begin -->\nold table\n<!-- bench:server end -->\n\nMore text.\n"
	doc, err := Splice([]byte(readme), "server", got["server"])
	if err != nil {
		t.Fatal(err)
	}
	want := "# rocev2-server\n\nRegenerate with make bench-server.\n\n" + sec + "\nMore text.\n"
	if diff := cmp.Diff(want, string(doc)); diff != "" {
		t.Errorf("Splice (-want +got):\n%s", diff)
	}
	// Splicing again with the same section changes nothing.
	again, err := Splice(doc, "server", sec)
	if err != nil || string(again) != string(doc) {
		t.Errorf("a second splice: err %v, changed %v", err, string(again) != string(doc))
	}
}

func TestExtractLastOfTwo(t *testing.T) {
	first, _ := Section("p", meta, "| first |")
	second, _ := Section("p", meta, "| second |")
	got, err := Extract(strings.NewReader(first + "noise\n" + second))
	if err != nil {
		t.Fatal(err)
	}
	if got["p"] != second {
		t.Errorf("Extract kept %q, want the last section", got["p"])
	}
}

func TestExtractRefuses(t *testing.T) {
	for name, output := range map[string]string{
		"begin without end": "<!-- bench:a begin -->\n| x |\n",
		"end without begin": "| x |\n<!-- bench:a end -->\n",
		"nested":            "<!-- bench:a begin -->\n<!-- bench:b begin -->\n<!-- bench:b end -->\n<!-- bench:a end -->\n",
		"end of another":    "<!-- bench:a begin -->\n<!-- bench:b end -->\n",
		"too long":          "<!-- bench:a begin -->\n" + strings.Repeat(strings.Repeat("x", 1000)+"\n", maxSection/1000+1),
	} {
		if got, err := Extract(strings.NewReader(output)); err == nil {
			t.Errorf("%s: Extract = %q, want an error", name, got)
		}
	}
}

func TestSpliceRefuses(t *testing.T) {
	sec, _ := Section("a", meta, table)
	for name, doc := range map[string]string{
		"twice":        "<!-- bench:a begin -->\n<!-- bench:a end -->\n<!-- bench:a begin -->\n<!-- bench:a end -->\n",
		"out of order": "<!-- bench:a end -->\n<!-- bench:a begin -->\n",
		"no end":       "<!-- bench:a begin -->\n",
	} {
		if _, err := Splice([]byte(doc), "a", sec); err == nil || errors.Is(err, ErrNoMarkers) {
			t.Errorf("%s: err %v, want a marker error", name, err)
		}
	}
	if _, err := Splice([]byte("# nothing here\n"), "a", sec); !errors.Is(err, ErrNoMarkers) {
		t.Errorf("a README without markers: err %v, want ErrNoMarkers", err)
	}
}
