// Command ud-pingpong is rdma-core's ibv_ud_pingpong in pure Go: the same
// command line, defaults, TCP address exchange and output, over pureverbs'
// UD (datagram) queue pairs and address handles, so that either end can be
// the C tool.
//
//	ud-pingpong [options]          start a server and wait for a connection
//	ud-pingpong [options] <host>   connect to the server at <host>
//
// Each end makes a UD QP with Q_Key 0x11111111, posts rx_depth receives of
// -s bytes (default 1024, at most the port's active MTU) plus the 40-byte
// GRH area, trades LID, QPN, PSN and GID over TCP (port 18515 by default),
// moves its QP to RTS, makes an address handle towards the peer's GID (hop
// limit 1) and then the two bounce one datagram back and forth -n times,
// sent from offset 40 of the buffer, by polling the CQ or (-e) sleeping on
// completion events. Each end prints its throughput and time per
// iteration. UD has no retransmission: a lost datagram stalls the exchange,
// as it does the C tool.
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
