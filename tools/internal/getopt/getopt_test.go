package getopt

import (
	"reflect"
	"testing"
)

var specs = []Spec{{Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
	{Short: 'l', Long: "list"}, {Short: 'v', Long: "verbose"}, {Short: 'V', Long: "version"}}

// The forms glibc's getopt_long accepts, and its wording for the ones it
// refuses.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		vals     []Value
		operands []string
		err      string
	}{
		{args: []string{"-vdrxe0"}, vals: []Value{{Short: 'v'}, {Short: 'd', Arg: "rxe0"}}},
		{args: []string{"host", "-d", "rxe1", "--ib-port=2"}, vals: []Value{{Short: 'd', Arg: "rxe1"}, {Short: 'i', Arg: "2"}}, operands: []string{"host"}},
		{args: []string{"--ib-d", "rxe0", "--li"}, vals: []Value{{Short: 'd', Arg: "rxe0"}, {Short: 'l'}}},
		{args: []string{"-v", "--", "-l"}, vals: []Value{{Short: 'v'}}, operands: []string{"-l"}},
		{args: []string{"--ver"}, err: "option '--ver' is ambiguous; possibilities: '--verbose' '--version'"},
		{args: []string{"--list=1"}, err: "option '--list' doesn't allow an argument"},
		{args: []string{"--ib-dev"}, err: "option '--ib-dev' requires an argument"},
		{args: []string{"-x"}, err: "invalid option -- 'x'"},
		{args: []string{"-vd"}, err: "option requires an argument -- 'd'"},
		{args: []string{"--nope"}, err: "unrecognized option '--nope'"},
	} {
		vals, operands, err := Parse(specs, tc.args)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(vals, tc.vals) || !reflect.DeepEqual(operands, tc.operands) {
			t.Errorf("%q: %+v %q %v; want %+v %q", tc.args, vals, operands, err, tc.vals, tc.operands)
		}
	}
}
