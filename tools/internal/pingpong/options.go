package pingpong

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	"github.com/pureverbs/pureverbs/uverbs"
)

// ErrUsage asks the caller to print the usage text and fail, as the C
// tools do for a bad value or a surplus operand.
var ErrUsage = errors.New("usage")

// Number parses a strtol-style integer (base prefix allowed) within
// [lo, hi]; anything else is ErrUsage.
func Number(s string, lo, hi int) (int, error) {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return 0, ErrUsage
	}
	return int(n), nil
}

// Options are the command line every ibv_*_pingpong has (rdma-core v44):
// the server operand and -p -d -i -s -r -n -l -e -g. A tool embeds them in
// its own options, next to the ones only some of the tools have (-m, -c
// and the rest).
type Options struct {
	Server   string // the operand: host to connect to; empty: be the server
	Port     int    // -p: TCP port of the address exchange
	IBDev    string // -d: device name; empty: the first device
	IBPort   uint8  // -i
	Size     int    // -s: message size
	RxDepth  int    // -r: receives posted at a time
	Iters    int    // -n
	SL       uint8  // -l
	Events   bool   // -e: sleep on completion events instead of polling
	GIDIndex int    // -g; -1: no GID, so the address vector has no GRH
}

// DefaultOptions are the C tools' defaults; size is the tool's own -s
// default (ibv_ud_pingpong's is 1024, the others' 4096).
func DefaultOptions(size int) Options {
	return Options{Port: 18515, IBPort: 1, Size: size, RxDepth: 500, Iters: 1000, GIDIndex: -1}
}

// Parse splits args (after the program name) as getopt_long does with
// specs, applies every option in order through set, and takes the one
// operand as the server to connect to (none: be the server). A getopt
// error or set's error is returned as it is; more than one operand is
// ErrUsage.
func (o *Options) Parse(specs []getopt.Spec, args []string, set func(c rune, arg string) error) error {
	vals, operands, err := getopt.Parse(specs, args)
	if err != nil {
		return err
	}
	for _, v := range vals {
		if err := set(v.Short, v.Arg); err != nil {
			return err
		}
	}
	switch len(operands) {
	case 0:
	case 1:
		o.Server = operands[0]
	default:
		return ErrUsage
	}
	return nil
}

// Set applies option c if it is one of the shared ones and reports whether
// it was; a tool's set tries it first, then its own options. min is the
// smallest -s and -r the tool takes (ibv_rc_pingpong takes 0, its siblings
// 1). Numbers are read like strtol with base 0 (decimal, 0x hex, 0 octal),
// but a malformed or out-of-range number is ErrUsage instead of read as far
// as it goes.
func (o *Options) Set(c rune, arg string, min int) (handled bool, err error) {
	var n int
	switch c {
	case 'p':
		o.Port, err = Number(arg, 0, 65535)
	case 'd':
		o.IBDev = arg
	case 'i':
		n, err = Number(arg, 1, 255)
		o.IBPort = uint8(n)
	case 's':
		o.Size, err = Number(arg, min, 1<<31-1)
	case 'r':
		o.RxDepth, err = Number(arg, min, 1<<31-1)
	case 'n':
		o.Iters, err = Number(arg, 0, 1<<31-1)
	case 'l':
		n, err = Number(arg, 0, 15)
		o.SL = uint8(n)
	case 'e':
		o.Events = true
	case 'g':
		o.GIDIndex, err = Number(arg, -1<<31, 1<<31-1)
	default:
		return false, nil
	}
	return true, err
}

// ParseMTU reads -m, the path MTU in bytes, for the tools that have it, as
// pp_mtu_to_enum does; a size that is no path MTU is ErrUsage.
func ParseMTU(arg string) (uverbs.MTU, error) {
	n, err := Number(arg, 0, 1<<31-1)
	if err != nil {
		return 0, err
	}
	for m := uverbs.MTU256; m <= uverbs.MTU4096; m++ {
		if m.Bytes() == n {
			return m, nil
		}
	}
	return 0, ErrUsage
}

// PrintUsage writes a pingpong tool's help text: the two ways to start it,
// which every ibv_*_pingpong prints alike, then lines, its own option
// lines as its C counterpart words them.
func PrintUsage(w io.Writer, argv0, lines string) {
	fmt.Fprintf(w, `Usage:
  %[1]s            start a server and wait for connection
  %[1]s <host>     connect to server at <host>

Options:
%[2]s`, argv0, lines)
}
