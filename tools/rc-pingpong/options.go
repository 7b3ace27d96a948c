package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// options is the parsed command line: the shared options and
// ibv_rc_pingpong's own.
type options struct {
	pp.Options
	mtu      uverbs.MTU
	odp      bool
	ts       bool
	validate bool
}

// defaultOptions are ibv_rc_pingpong's defaults.
func defaultOptions() options {
	return options{Options: pp.DefaultOptions(4096), mtu: uverbs.MTU1024}
}

// optionSpecs are ibv_rc_pingpong's options (rdma-core v44).
var optionSpecs = []getopt.Spec{
	{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
	{Short: 's', Long: "size", Arg: true}, {Short: 'm', Long: "mtu", Arg: true}, {Short: 'r', Long: "rx-depth", Arg: true},
	{Short: 'n', Long: "iters", Arg: true}, {Short: 'l', Long: "sl", Arg: true}, {Short: 'e', Long: "events", Arg: false},
	{Short: 'g', Long: "gid-idx", Arg: true}, {Short: 'o', Long: "odp", Arg: false}, {Short: 'O', Long: "iodp", Arg: false},
	{Short: 'P', Long: "prefetch", Arg: false}, {Short: 't', Long: "ts", Arg: false}, {Short: 'c', Long: "chk", Arg: false},
	{Short: 'j', Long: "dm", Arg: false}, {Short: 'N', Long: "new_send", Arg: false},
}

// parseOptions parses the arguments after the program name. A getopt error
// is returned as it is (the caller prints it and the usage); a bad value
// gives pp.ErrUsage; an option rxe cannot honour gives a plain error.
func parseOptions(args []string) (options, error) {
	o := defaultOptions()
	err := o.Parse(optionSpecs, args, o.set)
	return o, err
}

// set applies one option: the shared ones (-s and -r may be 0), then this
// tool's own.
func (o *options) set(c rune, arg string) (err error) {
	if ok, err := o.Options.Set(c, arg, 0); ok {
		return err
	}
	switch c {
	case 'm':
		o.mtu, err = pp.ParseMTU(arg)
	case 'c':
		o.validate = true
	case 'o':
		o.odp = true
	case 't':
		o.ts = true
	case 'N':
		// ibv_rc_pingpong's -N picks libibverbs' newer post-send calls;
		// the work request the device sees is the same, and pureverbs has
		// one post path.
	case 'O', 'P':
		return fmt.Errorf("-%c: implicit on-demand paging and MR prefetch are not supported by rxe", c)
	case 'j':
		return errors.New("-j: device memory is not supported by rxe")
	}
	return err
}

// printUsage writes ibv_rc_pingpong's help text for the options this tool
// shares with it.
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
  -o, --odp              use on demand paging
  -t, --ts               get CQE with timestamp
  -c, --chk              validate received buffer
  -N, --new_send         accepted for compatibility (one post path)
`)
}
