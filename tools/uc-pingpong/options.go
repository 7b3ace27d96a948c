package main

import (
	"fmt"
	"io"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// options is the parsed command line, with ibv_uc_pingpong's defaults.
type options struct {
	server   string // host to connect to; empty: be the server
	port     int    // TCP port of the address exchange
	ibDev    string // device name; empty: the first device
	ibPort   uint8
	size     int
	mtu      uverbs.MTU
	rxDepth  int
	iters    int
	sl       uint8
	events   bool
	gidIndex int // -1: no GID, so the address vector has no GRH
	validate bool
}

// defaultOptions are ibv_uc_pingpong's defaults.
func defaultOptions() options {
	return options{
		port:     18515,
		ibPort:   1,
		size:     4096,
		mtu:      uverbs.MTU1024,
		rxDepth:  500,
		iters:    1000,
		gidIndex: -1,
	}
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
	var err error
	if o.server, err = pp.ParseArgs(optionSpecs, args, o.set); err != nil {
		return o, err
	}
	return o, nil
}

// set applies one option; every one of this tool's is a shared one.
func (o *options) set(c rune, arg string) error {
	_, err := (pp.CommonFlags{Port: &o.port, Dev: &o.ibDev, IBPort: &o.ibPort, Size: &o.size, MTU: &o.mtu,
		RxDepth: &o.rxDepth, Iters: &o.iters, SL: &o.sl, Events: &o.events, GIDIndex: &o.gidIndex, Validate: &o.validate, Min: 1}).Set(c, arg)
	return err
}

// printUsage writes ibv_uc_pingpong's help text.
func printUsage(w io.Writer, argv0 string) {
	fmt.Fprintf(w, `Usage:
  %[1]s            start a server and wait for connection
  %[1]s <host>     connect to server at <host>

Options:
  -p, --port=<port>      listen on/connect to port <port> (default 18515)
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
`, argv0)
}
