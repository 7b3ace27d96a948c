package pingpong

import "github.com/pureverbs/pureverbs/tools/internal/getopt"

// ParseArgs splits args (after the program name) as getopt_long does with
// specs, applies every option in order through set, and returns the one
// operand, the server to connect to ("" when there is none: be the
// server). A getopt error or set's error is returned as it is; more than
// one operand is ErrUsage.
func ParseArgs(specs []getopt.Spec, args []string, set func(c rune, arg string) error) (server string, err error) {
	vals, operands, err := getopt.Parse(specs, args)
	if err != nil {
		return "", err
	}
	for _, v := range vals {
		if err := set(v.Short, v.Arg); err != nil {
			return "", err
		}
	}
	switch len(operands) {
	case 0:
		return "", nil
	case 1:
		return operands[0], nil
	}
	return "", ErrUsage
}
