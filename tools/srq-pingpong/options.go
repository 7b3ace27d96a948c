package main

import (
	"fmt"
	"io"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// maxQP is the C tool's MAX_QP: the number of address records each side
// sends, whatever -q says (the unused ones are all zeros).
const maxQP = 256

// options is the parsed command line, with ibv_srq_pingpong's defaults.
type options struct {
	server   string
	port     int
	ibDev    string
	ibPort   uint8
	size     int
	mtu      uverbs.MTU
	numQP    int
	rxDepth  int
	iters    int
	sl       uint8
	events   bool
	gidIndex int // -1: no GID, the address vector has no GRH
}

// defaultOptions are ibv_srq_pingpong's defaults.
func defaultOptions() options {
	return options{port: 18515, ibPort: 1, size: 4096, mtu: uverbs.MTU1024, numQP: 16, rxDepth: 500, iters: 1000, gidIndex: -1}
}

// optionSpecs are ibv_srq_pingpong's options (rdma-core v44).
var optionSpecs = []getopt.Spec{
	{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
	{Short: 's', Long: "size", Arg: true}, {Short: 'm', Long: "mtu", Arg: true}, {Short: 'q', Long: "num-qp", Arg: true},
	{Short: 'r', Long: "rx-depth", Arg: true}, {Short: 'n', Long: "iters", Arg: true}, {Short: 'l', Long: "sl", Arg: true},
	{Short: 'e', Long: "events", Arg: false}, {Short: 'g', Long: "gid-idx", Arg: true},
}

func parseOptions(args []string) (options, error) {
	o := defaultOptions()
	var err error
	if o.server, err = pp.ParseArgs(optionSpecs, args, o.set); err != nil {
		return o, err
	}
	if o.numQP > o.rxDepth {
		return o, fmt.Errorf("rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", o.rxDepth, o.numQP)
	}
	return o, nil
}

// set applies one option: the shared ones through pp.CommonFlags, then
// -q.
func (o *options) set(c rune, arg string) error {
	if ok, err := (pp.CommonFlags{Port: &o.port, Dev: &o.ibDev, IBPort: &o.ibPort, Size: &o.size, MTU: &o.mtu,
		RxDepth: &o.rxDepth, Iters: &o.iters, SL: &o.sl, Events: &o.events, GIDIndex: &o.gidIndex, Min: 1}).Set(c, arg); ok {
		return err
	}
	var err error
	if c == 'q' {
		// The C tool has room for MAX_QP queue pairs and does not check.
		o.numQP, err = pp.Number(arg, 1, maxQP)
	}
	return err
}

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
  -q, --num-qp=<num>     number of QPs to use (default 16)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges per QP(default 1000)
  -l, --sl=<sl>          service level value
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index
`, argv0)
}
