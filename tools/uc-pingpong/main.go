// Command uc-pingpong is rdma-core's ibv_uc_pingpong in pure Go: the same
// command line, defaults, TCP address exchange and output, over pureverbs'
// UC (unreliable connected) queue pairs, so that either end can be the C
// tool.
//
//	uc-pingpong [options]          start a server and wait for a connection
//	uc-pingpong [options] <host>   connect to the server at <host>
//
// The two ends post rx_depth receives, trade LID, QPN, PSN and GID over TCP
// (port 18515 by default), connect their UC QPs (RTR with the path, RTS with
// the send PSN only) and then bounce one message of -s bytes (default 4096)
// back and forth -n times, by polling the CQ or (-e) sleeping on completion
// events. Each end prints its throughput and time per iteration. UC has no
// retransmission: a lost packet stalls the exchange, as it does the C tool.
package main

import (
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
	return pp.Main(args, stdout, stderr, parseOptions, printUsage, pp.RunSession(openSession))
}
