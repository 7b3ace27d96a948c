package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/integration/internal/benchmd"
)

func readme(t *testing.T, dir, name, body string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// The run's output reaches stdout unchanged, and each section lands in the
// README that has its markers; the other README is left alone.
func TestRunSplices(t *testing.T) {
	dir := t.TempDir()
	perf := readme(t, dir, "perftest.md", "# perftest\n<!-- bench:perftest begin -->\nold\n<!-- bench:perftest end -->\ntail\n")
	srv := readme(t, dir, "server.md", "# server\n<!-- bench:server begin -->\nold\n<!-- bench:server end -->\n")
	sec, _ := benchmd.Section("perftest", benchmd.Meta{Commit: "abc"}, "| new |")
	output := "=== RUN TestPerftestBench\n" + sec + "--- PASS\nbench-exit 0\n"
	var out bytes.Buffer
	code, err := run(strings.NewReader(output), &out, []string{perf, srv})
	if err != nil || code != 0 {
		t.Fatalf("run: %d, %v", code, err)
	}
	if !strings.HasPrefix(out.String(), output) {
		t.Errorf("stdout does not start with the run's output:\n%s", out.String())
	}
	got, _ := os.ReadFile(perf)
	if want := "# perftest\n" + sec + "tail\n"; string(got) != want {
		t.Errorf("perftest.md:\n%s\nwant:\n%s", got, want)
	}
	if got, _ := os.ReadFile(srv); !strings.Contains(string(got), "\nold\n") {
		t.Errorf("server.md changed:\n%s", got)
	}
}

// A failed run changes no README and passes its exit status on.
func TestRunFailedRun(t *testing.T) {
	dir := t.TempDir()
	body := "<!-- bench:perftest begin -->\nold\n<!-- bench:perftest end -->\n"
	perf := readme(t, dir, "perftest.md", body)
	sec, _ := benchmd.Section("perftest", benchmd.Meta{}, "| new |")
	code, err := run(strings.NewReader(sec+"FAIL\nbench-exit 2\n"), &bytes.Buffer{}, []string{perf})
	if err != nil || code != 2 {
		t.Errorf("run: %d, %v; want 2, nil", code, err)
	}
	if got, _ := os.ReadFile(perf); string(got) != body {
		t.Errorf("perftest.md changed after a failed run:\n%s", got)
	}
}

// A run that printed no section (a subset of the rows) changes nothing
// and succeeds, saying so.
func TestRunNoSection(t *testing.T) {
	dir := t.TempDir()
	body := "<!-- bench:x begin -->\n<!-- bench:x end -->\n"
	a := readme(t, dir, "a.md", body)
	var out bytes.Buffer
	if code, err := run(strings.NewReader("PASS\nbench-exit 0\n"), &out, []string{a}); err != nil || code != 0 {
		t.Errorf("run: %d, %v; want 0, nil", code, err)
	}
	if got, _ := os.ReadFile(a); string(got) != body || !strings.Contains(out.String(), "no README changed") {
		t.Errorf("a.md:\n%s\noutput:\n%s", got, out.String())
	}
}

func TestRunRefuses(t *testing.T) {
	dir := t.TempDir()
	a := readme(t, dir, "a.md", "<!-- bench:x begin -->\n<!-- bench:x end -->\n")
	b := readme(t, dir, "b.md", "<!-- bench:x begin -->\n<!-- bench:x end -->\n")
	c := readme(t, dir, "c.md", "nothing\n")
	sec, _ := benchmd.Section("x", benchmd.Meta{}, "| new |")
	for name, tc := range map[string]struct {
		output string
		files  []string
	}{
		"no file has it":    {sec, []string{c}},
		"two files have it": {sec, []string{a, b}},
		"no files":          {sec, nil},
	} {
		if code, err := run(strings.NewReader(tc.output), &bytes.Buffer{}, tc.files); err == nil || code == 0 {
			t.Errorf("%s: run = %d, %v; want a failure", name, code, err)
		}
	}
	for _, f := range []string{a, b} {
		if got, _ := os.ReadFile(f); string(got) != "<!-- bench:x begin -->\n<!-- bench:x end -->\n" {
			t.Errorf("%s changed by a refused run:\n%s", f, got)
		}
	}
}
