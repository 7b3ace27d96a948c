// Command srq-pingpong is rdma-core's ibv_srq_pingpong in pure Go: the same
// command line, defaults, TCP address exchange and output, so that either
// end can be the C tool.
//
//	srq-pingpong [options]          start a server and wait for a connection
//	srq-pingpong [options] <host>   connect to the server at <host>
//
// Each end creates -q RC queue pairs (16 by default) that all receive from
// one shared receive queue of -r requests, trades the addresses of all of
// them over TCP (always 256 records each way, as the C tool does; QP i
// pairs with the peer's QP i), and then bounces -s byte messages over every
// QP until -n messages in total went each way, polling the CQ or (-e)
// sleeping on completion events. Each end prints one address line per QP
// and its throughput and time per iteration.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/tools/internal/waitprocs"
)

func main() {
	waitprocs.Ensure() // a second P for the completion waits (see the package)
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return pp.Main(args, stdout, stderr, parseOptions, printUsage, pingpongMain)
}

// pingpongMain runs one end in ibv_srq_pingpong's order: more QPs than
// receives are refused first, as the C tool does once its options are
// read, with its message and no usage.
func pingpongMain(o *options, stdout io.Writer) (err error) {
	if o.numQP > o.RxDepth {
		return fmt.Errorf("rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", o.RxDepth, o.numQP)
	}
	e, err := openEndpoint(o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	if err := e.fillSRQ(o.RxDepth); err != nil {
		return err
	}
	if o.Events {
		if err := e.cq.ReqNotify(false); err != nil {
			return fmt.Errorf("Couldn't request CQ notification: %w", err)
		}
	}
	local, err := e.localPeers()
	if err != nil {
		return err
	}
	for _, p := range local {
		pp.PrintAddress(stdout, "local address: ", pp.Dest(p))
	}
	client := o.Server != ""
	remote, err := func() ([]peerT, error) {
		if client {
			return dialExchange(o.Server, o.Port, local)
		}
		ln, err := pp.Listen(o.Port)
		if err != nil {
			return nil, err
		}
		return acceptExchange(ln, local, func(r []peerT) error { return e.connect(local, r) })
	}()
	if err != nil {
		return err
	}
	for _, p := range remote {
		pp.PrintAddress(stdout, "remote address:", pp.Dest(p))
	}
	if client {
		if err := e.connect(local, remote); err != nil {
			return err
		}
	}
	if !o.Events {
		runtime.LockOSThread() // the poll loop spins
		defer runtime.UnlockOSThread()
	}
	start := time.Now()
	events, err := e.exchange(client)
	elapsed := time.Since(start)
	e.cq.Ack(events)
	if err != nil {
		return err
	}
	pp.PrintSummary(stdout, o.Size, o.Iters, elapsed)
	return nil
}
