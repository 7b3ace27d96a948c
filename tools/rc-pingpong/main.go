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
	"fmt"
	"io"
	"os"

	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/tools/internal/waitprocs"
)

func main() {
	waitprocs.Ensure() // a second P for the completion waits (see the package)
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return pp.Main(args, stdout, stderr, parseOptions, printUsage,
		pp.RunSession(func(o *options) (*pp.Session, error) { return openSession(o, stderr) }))
}

// countMallocs starts counting the loop's heap allocations once a quarter
// of its iterations (at least one) are done, and returns what reports the
// count, and where they were made, on w after the loop.
func countMallocs(p *pp.Pingpong, iters int, w io.Writer) (report func()) {
	allocs, warm := newLoopAllocs(pp.Loop), &loopAllocs{}
	var warmAllocs int64
	var allocErr error
	p.WarmUp = max(iters/4, 1)
	p.OnWarm = func() {
		warmAllocs, allocErr = allocs.snapshot()
		warm.sites, warm.nsite = allocs.sites, allocs.nsite
	}
	return func() {
		if p.Received() < p.WarmUp {
			return
		}
		n, serr := allocs.snapshot()
		if allocErr = cmp.Or(allocErr, serr); allocErr != nil {
			fmt.Fprintf(w, "rc-pingpong: counting allocations: %v\n", allocErr)
			return
		}
		fmt.Fprintf(w, "rc-pingpong: %d heap allocations in the %d iterations after a warm-up of %d\n",
			n-warmAllocs, iters-p.WarmUp, p.WarmUp)
		allocs.report(w, warm)
	}
}
