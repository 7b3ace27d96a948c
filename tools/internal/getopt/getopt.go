// Package getopt splits a command line the way glibc's getopt_long(3) does,
// for the tools that mirror rdma-core's C programs option for option.
package getopt

import (
	"fmt"
	"strings"
)

// Spec is one option as getopt_long(3) knows it: a short letter, a long
// name and whether it takes an argument.
type Spec struct {
	Short rune
	Long  string
	Arg   bool
}

// Value is one option found on the command line.
type Value struct {
	Short rune
	Arg   string
}

// Parse splits args (without the program name) the way glibc's getopt_long
// does for rdma-core's tools: options may be bundled (-ec), take their argument
// attached or as the next word (-s4096, -s 4096, --size=4096, --size 4096),
// long names may be abbreviated to any unambiguous prefix, operands may come
// before or after options, and "--" ends the options. It returns the options
// in order and the operands; a malformed command line gives an error worded
// like glibc's.
func Parse(specs []Spec, args []string) ([]Value, []string, error) {
	var opts []Value
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			v, used, err := longOption(specs, a[2:], args[i+1:])
			if err != nil {
				return nil, nil, err
			}
			opts = append(opts, v)
			i += used
		case len(a) > 1 && a[0] == '-':
			vs, used, err := shortOptions(specs, a[1:], args[i+1:])
			if err != nil {
				return nil, nil, err
			}
			opts = append(opts, vs...)
			i += used
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

// longOption parses "name" or "name=value" (after the dashes); rest is what
// follows on the command line, from which a separate argument is taken. It
// returns how many words of rest it used.
func longOption(specs []Spec, word string, rest []string) (Value, int, error) {
	name, value, hasValue := strings.Cut(word, "=")
	var match *Spec
	var candidates []string
	for i := range specs {
		s := &specs[i]
		if s.Long == name {
			match, candidates = s, nil
			break
		}
		if strings.HasPrefix(s.Long, name) {
			match = s
			candidates = append(candidates, "'--"+s.Long+"'")
		}
	}
	switch {
	case match == nil:
		return Value{}, 0, fmt.Errorf("unrecognized option '--%s'", name)
	case len(candidates) > 1:
		return Value{}, 0, fmt.Errorf("option '--%s' is ambiguous; possibilities: %s", name, strings.Join(candidates, " "))
	case !match.Arg && hasValue:
		return Value{}, 0, fmt.Errorf("option '--%s' doesn't allow an argument", match.Long)
	case !match.Arg:
		return Value{Short: match.Short}, 0, nil
	case hasValue:
		return Value{Short: match.Short, Arg: value}, 0, nil
	case len(rest) > 0:
		return Value{Short: match.Short, Arg: rest[0]}, 1, nil
	}
	return Value{}, 0, fmt.Errorf("option '--%s' requires an argument", match.Long)
}

// shortOptions parses a bundle of short options (the word after its dash).
func shortOptions(specs []Spec, bundle string, rest []string) ([]Value, int, error) {
	var vs []Value
	for j, c := range bundle {
		s := findShort(specs, c)
		if s == nil {
			return nil, 0, fmt.Errorf("invalid option -- '%c'", c)
		}
		if !s.Arg {
			vs = append(vs, Value{Short: c})
			continue
		}
		if tail := bundle[j+len(string(c)):]; tail != "" {
			return append(vs, Value{Short: c, Arg: tail}), 0, nil
		}
		if len(rest) == 0 {
			return nil, 0, fmt.Errorf("option requires an argument -- '%c'", c)
		}
		return append(vs, Value{Short: c, Arg: rest[0]}), 1, nil
	}
	return vs, 0, nil
}

func findShort(specs []Spec, c rune) *Spec {
	for i := range specs {
		if specs[i].Short == c {
			return &specs[i]
		}
	}
	return nil
}
