package pingpong

import (
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Main's exit statuses and messages, as the C tools' main() gives them.
func TestMainExitStatus(t *testing.T) {
	usage := func(w io.Writer, argv0 string) { io.WriteString(w, "Usage: "+argv0+"\n") }
	for _, tc := range []struct {
		parseErr, runErr     error
		status               int
		wantStdout, wantErrs string
	}{
		{nil, nil, 0, "", ""},
		{ErrUsage, nil, 1, "Usage: tool\n", ""},
		{errors.New("invalid option -- 'x'"), nil, 1, "Usage: tool\n", "tool: invalid option -- 'x'\n"},
		{nil, errors.New("Couldn't create QP"), 1, "", "Couldn't create QP\n"},
	} {
		var stdout, stderr strings.Builder
		ran := false
		parse := func(args []string) (int, error) { return len(args), tc.parseErr }
		run := func(n *int, _ io.Writer) error {
			ran = true
			if *n != 2 {
				t.Errorf("run got %d operands, want 2", *n)
			}
			return tc.runErr
		}
		status := Main([]string{"tool", "-a", "b"}, &stdout, &stderr, parse, usage, run)
		if status != tc.status || stdout.String() != tc.wantStdout || stderr.String() != tc.wantErrs || ran != (tc.parseErr == nil) {
			t.Errorf("parse %v, run %v: status %d, stdout %q, stderr %q, ran %v", tc.parseErr, tc.runErr, status, stdout.String(), stderr.String(), ran)
		}
	}
}

// A report that cannot be written (stdout on a full disk) fails the run,
// naming the write error, even when the test itself succeeded; the C
// tools, and these before, exited 0.
func TestMainReportWriteFails(t *testing.T) {
	usage := func(w io.Writer, argv0 string) {}
	parse := func(args []string) (int, error) { return 0, nil }
	run := func(_ *int, stdout io.Writer) error {
		PrintSummary(stdout, 4096, 1000, time.Second)
		return nil
	}
	var stderr strings.Builder
	full := writerFunc(func(p []byte) (int, error) { return 0, syscall.ENOSPC })
	status := Main([]string{"tool"}, full, &stderr, parse, usage, run)
	if status != 1 || !strings.Contains(stderr.String(), "tool: writing the report: no space left on device") {
		t.Fatalf("status %d, stderr %q", status, stderr.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
