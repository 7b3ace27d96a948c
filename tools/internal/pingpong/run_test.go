package pingpong

import (
	"errors"
	"io"
	"strings"
	"testing"
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
		run := func(n *int) error {
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
