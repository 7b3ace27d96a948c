package pingpong

import (
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The defaults every C tool's main() starts from.
func TestDefaultOptions(t *testing.T) {
	want := Options{Port: 18515, IBPort: 1, Size: 2048, RxDepth: 500, Iters: 1000, GIDIndex: -1}
	if got := DefaultOptions(2048); got != want {
		t.Errorf("DefaultOptions(2048) = %+v, want %+v", got, want)
	}
}

// Every shared option, the strtol base-0 numbers, the bounds and min; a
// letter that is no shared option is left to the tool.
func TestOptionsSet(t *testing.T) {
	var o Options
	for _, tc := range []struct {
		c   rune
		arg string
	}{
		{'p', "0x4853"}, {'d', "rxe1"}, {'i', "2"}, {'s', "010"}, {'r', "0"}, {'n', "7"}, {'l', "15"}, {'e', ""}, {'g', "-1"}, {'g', "3"},
	} {
		if ok, err := o.Set(tc.c, tc.arg, 0); !ok || err != nil {
			t.Errorf("-%c %q: handled %v, %v", tc.c, tc.arg, ok, err)
		}
	}
	want := Options{Port: 0x4853, IBDev: "rxe1", IBPort: 2, Size: 8, RxDepth: 0, Iters: 7, SL: 15, Events: true, GIDIndex: 3}
	if o != want {
		t.Errorf("got %+v, want %+v", o, want)
	}
	for _, tc := range []struct {
		c   rune
		arg string
		min int
	}{
		{'p', "65536", 0}, {'i', "0", 0}, {'i', "256", 0}, {'s', "12k", 0}, {'s', "0", 1}, {'r', "0", 1},
		{'n', "-1", 0}, {'l', "16", 0}, {'g', "x", 0},
	} {
		if ok, err := o.Set(tc.c, tc.arg, tc.min); !ok || !errors.Is(err, ErrUsage) {
			t.Errorf("-%c %q (min %d): handled %v, %v, want ErrUsage", tc.c, tc.arg, tc.min, ok, err)
		}
	}
	for _, c := range "mcqoOPtjNx" {
		if ok, _ := o.Set(c, "1", 0); ok {
			t.Errorf("-%c handled: it is no shared option", c)
		}
	}
}

func TestOptionsParse(t *testing.T) {
	specs := []getopt.Spec{{Short: 'e', Long: "events"}, {Short: 'n', Long: "iters", Arg: true}}
	var got []string
	set := func(c rune, arg string) error {
		if arg == "bad" {
			return ErrUsage
		}
		got = append(got, string(c)+arg)
		return nil
	}
	var o Options
	if err := o.Parse(specs, []string{"-e", "host", "--iters=5"}, set); err != nil || o.Server != "host" || len(got) != 2 || got[0] != "e" || got[1] != "n5" {
		t.Errorf("server %q, options %q, %v", o.Server, got, err)
	}
	o = Options{}
	if err := o.Parse(specs, nil, set); err != nil || o.Server != "" {
		t.Errorf("no operand: server %q, %v", o.Server, err)
	}
	for _, args := range [][]string{{"a", "b"}, {"-n", "bad"}} {
		if err := o.Parse(specs, args, set); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want ErrUsage", args, err)
		}
	}
	if err := o.Parse(specs, []string{"-x"}, set); err == nil || err.Error() != "invalid option -- 'x'" {
		t.Errorf("-x: %v", err)
	}
}

// -m takes only a path MTU.
func TestParseMTU(t *testing.T) {
	for arg, want := range map[string]uverbs.MTU{"256": uverbs.MTU256, "512": uverbs.MTU512, "1024": uverbs.MTU1024,
		"0x800": uverbs.MTU2048, "4096": uverbs.MTU4096} {
		if m, err := ParseMTU(arg); err != nil || m != want {
			t.Errorf("-m %s: %v, %v; want %v", arg, m, err, want)
		}
	}
	for _, arg := range []string{"1500", "0", "8192", "128", "1k", ""} {
		if _, err := ParseMTU(arg); !errors.Is(err, ErrUsage) {
			t.Errorf("-m %q: %v, want ErrUsage", arg, err)
		}
	}
}

func TestPrintUsage(t *testing.T) {
	var sb strings.Builder
	PrintUsage(&sb, "tool", "  -x\n")
	want := "Usage:\n  tool            start a server and wait for connection\n  tool <host>     connect to server at <host>\n\nOptions:\n  -x\n"
	if sb.String() != want {
		t.Errorf("got %q\nwant %q", sb.String(), want)
	}
}
