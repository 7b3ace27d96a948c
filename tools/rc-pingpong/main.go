// Command rc-pingpong is rdma-core's ibv_rc_pingpong in pure Go: the same
// command line, defaults, TCP address exchange and output, over pureverbs'
// RC queue pairs, so that either end can be the C tool.
//
//	rc-pingpong [options]          start a server and wait for a connection
//	rc-pingpong [options] <host>   connect to the server at <host>
//
// The two ends post rx_depth receives, trade LID, QPN, PSN and GID over TCP
// (port 18515 by default), connect their RC QPs and then bounce one message
// of -s bytes back and forth -n times, by polling the CQ or (-e) sleeping on
// completion events. Each end prints its throughput and time per iteration.
//
// With RC_PINGPONG_MALLOCS=1 in the environment it also reports, on stderr,
// how many heap allocations the exchange loop made in the iterations after
// a warm-up of a quarter of them (at least one), and where: it should make
// none.
package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args[1:])
	switch {
	case errors.Is(err, pp.ErrUsage):
		printUsage(stdout, args[0])
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
		printUsage(stdout, args[0])
		return 1
	}
	if err := pingpongMain(&o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// pingpongMain sets up one end, connects it to its peer and runs the
// exchange, in ibv_rc_pingpong's order.
func pingpongMain(o *options, stdout, stderr io.Writer) (err error) {
	e, err := openEndpoint(o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.close()) }()

	p := &pp.Pingpong{Q: e, Iters: o.iters, RxDepth: o.rxDepth}
	if err := p.Fill(); err != nil {
		return err
	}
	if o.events {
		if err := e.cq.ReqNotify(false); err != nil {
			return fmt.Errorf("Couldn't request CQ notification: %w", err)
		}
	}
	psn := rand.Uint32() & 0xffffff
	local, err := e.localDest(psn)
	if err != nil {
		return err
	}
	pp.PrintAddress(stdout, "local address: ", local)

	client := o.server != ""
	var remote pp.Dest
	if client {
		remote, err = pp.DialExchange(o.server, o.port, local)
	} else {
		ln, lerr := pp.Listen(o.port)
		if lerr != nil {
			return lerr
		}
		remote, err = pp.AcceptExchange(ln, local, func(r pp.Dest) error { return e.connect(r, psn) })
	}
	if err != nil {
		return err
	}
	pp.PrintAddress(stdout, "remote address:", remote)
	if client {
		if err := e.connect(remote, psn); err != nil {
			return err
		}
		if o.validate {
			pp.MarkPages(e.buf.Bytes())
		}
	}

	if err := p.Start(client); err != nil {
		return err
	}
	if !o.events {
		// The poll loop spins; keep it on one thread (see the style notes
		// on spin loops and preemption).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	countMallocs := os.Getenv("RC_PINGPONG_MALLOCS") == "1"
	var allocs, warm *loopAllocs
	var warmAllocs int64
	var allocErr error
	if countMallocs {
		allocs, warm = newLoopAllocs(pp.Loop), &loopAllocs{}
		p.WarmUp = max(o.iters/4, 1)
		p.OnWarm = func() {
			warmAllocs, allocErr = allocs.snapshot()
			warm.sites, warm.nsite = allocs.sites, allocs.nsite
		}
	}
	start := time.Now()
	events, err := pp.Loop(e.cq, e.ch, p, e.wc[:])
	elapsed := time.Since(start)
	if countMallocs && p.Received() >= p.WarmUp {
		n, serr := allocs.snapshot()
		if allocErr = cmp.Or(allocErr, serr); allocErr != nil {
			fmt.Fprintf(stderr, "rc-pingpong: counting allocations: %v\n", allocErr)
		} else {
			fmt.Fprintf(stderr, "rc-pingpong: %d heap allocations in the %d iterations after a warm-up of %d\n",
				n-warmAllocs, o.iters-p.WarmUp, p.WarmUp)
			allocs.report(stderr, warm)
		}
	}
	e.cq.Ack(events)
	if err != nil {
		return err
	}
	pp.PrintSummary(stdout, o.size, o.iters, elapsed)
	if !client && o.validate {
		pp.CheckPages(stdout, e.buf.Bytes())
	}
	return nil
}
