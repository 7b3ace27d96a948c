package pingpong

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
)

func TestParseArgs(t *testing.T) {
	specs := []getopt.Spec{{Short: 'e', Long: "events"}, {Short: 'n', Long: "iters", Arg: true}}
	var got []string
	set := func(c rune, arg string) error {
		if arg == "bad" {
			return ErrUsage
		}
		got = append(got, string(c)+arg)
		return nil
	}
	server, err := ParseArgs(specs, []string{"-e", "host", "--iters=5"}, set)
	if err != nil || server != "host" || len(got) != 2 || got[0] != "e" || got[1] != "n5" {
		t.Errorf("server %q, options %q, %v", server, got, err)
	}
	if server, err := ParseArgs(specs, nil, set); err != nil || server != "" {
		t.Errorf("no operand: server %q, %v", server, err)
	}
	for _, args := range [][]string{{"a", "b"}, {"-n", "bad"}} {
		if _, err := ParseArgs(specs, args, set); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want ErrUsage", args, err)
		}
	}
	if _, err := ParseArgs(specs, []string{"-x"}, set); err == nil || err.Error() != "invalid option -- 'x'" {
		t.Errorf("-x: %v", err)
	}
}
