package main

import (
	"io"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// maxQP is the C tool's MAX_QP: the number of address records each side
// sends, whatever -q says (the unused ones are all zeros).
const maxQP = 256

// options is the parsed command line: the shared options, -m and -q.
type options struct {
	pp.Options
	mtu   uverbs.MTU
	numQP int
}

// defaultOptions are ibv_srq_pingpong's defaults.
func defaultOptions() options {
	return options{Options: pp.DefaultOptions(4096), mtu: uverbs.MTU1024, numQP: 16}
}

// optionSpecs are ibv_srq_pingpong's options (rdma-core v44).
var optionSpecs = []getopt.Spec{
	{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
	{Short: 's', Long: "size", Arg: true}, {Short: 'm', Long: "mtu", Arg: true}, {Short: 'q', Long: "num-qp", Arg: true},
	{Short: 'r', Long: "rx-depth", Arg: true}, {Short: 'n', Long: "iters", Arg: true}, {Short: 'l', Long: "sl", Arg: true},
	{Short: 'e', Long: "events", Arg: false}, {Short: 'g', Long: "gid-idx", Arg: true},
}

// parseOptions parses the arguments after the program name. A getopt error
// is returned as it is (the caller prints it and the usage); a bad value or
// a surplus operand gives pp.ErrUsage.
func parseOptions(args []string) (options, error) {
	o := defaultOptions()
	err := o.Parse(optionSpecs, args, o.set)
	return o, err
}

// set applies one option: the shared ones (-s and -r at least 1), -m, -q.
func (o *options) set(c rune, arg string) (err error) {
	if ok, err := o.Options.Set(c, arg, 1); ok {
		return err
	}
	switch c {
	case 'm':
		o.mtu, err = pp.ParseMTU(arg)
	case 'q':
		// The C tool has room for MAX_QP queue pairs and does not check.
		o.numQP, err = pp.Number(arg, 1, maxQP)
	}
	return err
}

// printUsage writes ibv_srq_pingpong's help text for the options this tool
// has.
func printUsage(w io.Writer, argv0 string) {
	pp.PrintUsage(w, argv0, `  -p, --port=<port>      listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default 1)
  -s, --size=<size>      size of message to exchange (default 4096)
  -m, --mtu=<size>       path MTU (default 1024)
  -q, --num-qp=<num>     number of QPs to use (default 16)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges per QP(default 1000)
  -l, --sl=<sl>          service level value
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index
`)
}
