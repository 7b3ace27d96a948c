package main

import (
	"io"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// options is the parsed command line: the shared options, -m and -c.
type options struct {
	pp.Options
	mtu      uverbs.MTU
	validate bool
}

// defaultOptions are ibv_uc_pingpong's defaults.
func defaultOptions() options {
	return options{Options: pp.DefaultOptions(4096), mtu: uverbs.MTU1024}
}

// optionSpecs are ibv_uc_pingpong's options (rdma-core v44).
var optionSpecs = []getopt.Spec{
	{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true},
	{Short: 'i', Long: "ib-port", Arg: true}, {Short: 's', Long: "size", Arg: true},
	{Short: 'm', Long: "mtu", Arg: true}, {Short: 'r', Long: "rx-depth", Arg: true},
	{Short: 'n', Long: "iters", Arg: true}, {Short: 'l', Long: "sl", Arg: true},
	{Short: 'e', Long: "events"}, {Short: 'g', Long: "gid-idx", Arg: true},
	{Short: 'c', Long: "chk"},
}

// parseOptions parses the arguments after the program name. A getopt error
// is returned as it is (the caller prints it and the usage); a bad value or
// a surplus operand gives pp.ErrUsage.
func parseOptions(args []string) (options, error) {
	o := defaultOptions()
	err := o.Parse(optionSpecs, args, o.set)
	return o, err
}

// set applies one option: the shared ones (-s and -r at least 1), -m, -c.
func (o *options) set(c rune, arg string) (err error) {
	if ok, err := o.Options.Set(c, arg, 1); ok {
		return err
	}
	switch c {
	case 'm':
		o.mtu, err = pp.ParseMTU(arg)
	case 'c':
		o.validate = true
	}
	return err
}

// printUsage writes ibv_uc_pingpong's help text.
func printUsage(w io.Writer, argv0 string) {
	pp.PrintUsage(w, argv0, `  -p, --port=<port>      listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default 1)
  -s, --size=<size>      size of message to exchange (default 4096)
  -m, --mtu=<size>       path MTU (default 1024)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges (default 1000)
  -l, --sl=<sl>          service level value
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index
  -c, --chk              validate received buffer
`)
}
