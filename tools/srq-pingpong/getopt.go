package main

import (
	"fmt"
	"strings"
)

// optSpec is one option as getopt_long(3) knows it: a short letter, a long
// name and whether it takes an argument.
type optSpec struct {
	short rune
	long  string
	arg   bool
}

// optValue is one option found on the command line.
type optValue struct {
	short rune
	arg   string
}

// getopt splits args (without the program name) the way glibc's getopt_long
// does for ibv_rc_pingpong: options may be bundled (-ec), take their argument
// attached or as the next word (-s4096, -s 4096, --size=4096, --size 4096),
// long names may be abbreviated to any unambiguous prefix, operands may come
// before or after options, and "--" ends the options. It returns the options
// in order and the operands; a malformed command line gives an error worded
// like glibc's.
func getopt(specs []optSpec, args []string) ([]optValue, []string, error) {
	var opts []optValue
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
func longOption(specs []optSpec, word string, rest []string) (optValue, int, error) {
	name, value, hasValue := strings.Cut(word, "=")
	var match *optSpec
	var candidates []string
	for i := range specs {
		s := &specs[i]
		if s.long == name {
			match, candidates = s, nil
			break
		}
		if strings.HasPrefix(s.long, name) {
			match = s
			candidates = append(candidates, "'--"+s.long+"'")
		}
	}
	switch {
	case match == nil:
		return optValue{}, 0, fmt.Errorf("unrecognized option '--%s'", name)
	case len(candidates) > 1:
		return optValue{}, 0, fmt.Errorf("option '--%s' is ambiguous; possibilities: %s", name, strings.Join(candidates, " "))
	case !match.arg && hasValue:
		return optValue{}, 0, fmt.Errorf("option '--%s' doesn't allow an argument", match.long)
	case !match.arg:
		return optValue{short: match.short}, 0, nil
	case hasValue:
		return optValue{short: match.short, arg: value}, 0, nil
	case len(rest) > 0:
		return optValue{short: match.short, arg: rest[0]}, 1, nil
	}
	return optValue{}, 0, fmt.Errorf("option '--%s' requires an argument", match.long)
}

// shortOptions parses a bundle of short options (the word after its dash).
func shortOptions(specs []optSpec, bundle string, rest []string) ([]optValue, int, error) {
	var vs []optValue
	for j, c := range bundle {
		s := findShort(specs, c)
		if s == nil {
			return nil, 0, fmt.Errorf("invalid option -- '%c'", c)
		}
		if !s.arg {
			vs = append(vs, optValue{short: c})
			continue
		}
		if tail := bundle[j+len(string(c)):]; tail != "" {
			return append(vs, optValue{short: c, arg: tail}), 0, nil
		}
		if len(rest) == 0 {
			return nil, 0, fmt.Errorf("option requires an argument -- '%c'", c)
		}
		return append(vs, optValue{short: c, arg: rest[0]}), 1, nil
	}
	return vs, 0, nil
}

func findShort(specs []optSpec, c rune) *optSpec {
	for i := range specs {
		if specs[i].short == c {
			return &specs[i]
		}
	}
	return nil
}
