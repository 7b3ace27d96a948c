package pingpong

import "github.com/pureverbs/pureverbs/uverbs"

// CommonFlags points at the fields of a tool's options that the pingpong
// tools share (-p -d -i -s -m -r -n -l -e -g -c), the way flag.IntVar
// points at a variable. A nil field is an option the tool does not have;
// its getopt table does not list it either.
type CommonFlags struct {
	Port     *int
	Dev      *string
	IBPort   *uint8
	Size     *int
	MTU      *uverbs.MTU
	RxDepth  *int
	Iters    *int
	SL       *uint8
	Events   *bool
	GIDIndex *int
	Validate *bool
	// Min is the smallest -s and -r the tool takes (ibv_rc_pingpong
	// takes 0, its siblings 1).
	Min int
}

// Set applies option c if it is one of the shared ones and reports
// whether it was. Numbers are read like strtol with base 0 (decimal, 0x
// hex, 0 octal), but a malformed number is refused instead of read as far
// as it goes; a path MTU that is not one is ErrUsage.
func (f CommonFlags) Set(c rune, arg string) (handled bool, err error) {
	var n int
	switch {
	case c == 'p' && f.Port != nil:
		*f.Port, err = Number(arg, 0, 65535)
	case c == 'd' && f.Dev != nil:
		*f.Dev = arg
	case c == 'i' && f.IBPort != nil:
		n, err = Number(arg, 1, 255)
		*f.IBPort = uint8(n)
	case c == 's' && f.Size != nil:
		*f.Size, err = Number(arg, f.Min, 1<<31-1)
	case c == 'm' && f.MTU != nil:
		if n, err = Number(arg, 0, 1<<31-1); err == nil {
			if *f.MTU = MTUFromBytes(n); *f.MTU == 0 {
				err = ErrUsage
			}
		}
	case c == 'r' && f.RxDepth != nil:
		*f.RxDepth, err = Number(arg, f.Min, 1<<31-1)
	case c == 'n' && f.Iters != nil:
		*f.Iters, err = Number(arg, 0, 1<<31-1)
	case c == 'l' && f.SL != nil:
		n, err = Number(arg, 0, 15)
		*f.SL = uint8(n)
	case c == 'e' && f.Events != nil:
		*f.Events = true
	case c == 'g' && f.GIDIndex != nil:
		*f.GIDIndex, err = Number(arg, -1<<31, 1<<31-1)
	case c == 'c' && f.Validate != nil:
		*f.Validate = true
	default:
		return false, nil
	}
	return true, err
}
