// Command perftest is perftest's InfiniBand/RoCE benchmarks in pure Go:
// ib_send_bw, ib_send_lat, ib_write_bw, ib_write_lat, ib_read_bw,
// ib_read_lat, ib_atomic_bw and ib_atomic_lat, over pureverbs' queue
// pairs, speaking perftest 4.5's out-of-band exchange (it announces
// version 6.06) so that either end can be Debian's C tool.
//
//	perftest ib_send_bw [options]          server: wait for a client
//	perftest ib_send_bw [options] <host>   client: connect to the server
//	ib_send_bw [options] [host]            the same, as a link named after the test
//
// Options are perftest's (-d -i -x -p -s -n -a -D -t -r -Q -l -q -b -c -e
// -o -A -F -m -u -N -I -C -H -U -R -z, --report_gbits, --run_infinitely,
// --output, --dont_xchg_versions, --source_ip, ...), with its defaults, its refusals
// and its output: the header block, the address lines and the result
// table, computed as perftest computes them (MB/sec are MiB/s; latencies
// are halved round trips for send and write). Timestamps come from the
// monotonic clock in nanoseconds instead of the TSC, so -F changes
// nothing.
//
// Unlike the C tools, a run whose completions stop for 30 s (a peer with
// other parameters, or gone) ends with an error instead of hanging, and
// every exchange with the peer is bounded by a minute while it is expected
// to answer at once (PERFTEST_TIMEOUT, a Go duration, sets both limits).
// What the peer announces (version, page size, cache line, MTU, address
// records) is checked before anything is sized or posted from it, and a
// lie is refused naming the field and the value; a report that could not
// be written in full fails the run.
// -R runs the exchange and the test QPs over RDMA CM (package qp/rdmacm),
// one connection per QP, RC or UD (perftest refuses UC there); -z only
// the exchange.
//
// For tests: PERFTEST_MALLOCS=1 reports each measured loop's heap
// allocations, PERFTEST_TARGET=1 what the peer left in the target windows,
// PERFTEST_CPUPROFILE=<file> profiles the measured loops.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/pureverbs/pureverbs/tools/internal/errwriter"
	"github.com/pureverbs/pureverbs/tools/internal/waitprocs"
)

func main() {
	waitprocs.Ensure() // a second P for the completion waits (see the package)
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit status. A report that
// could not be written in full fails the run (see errwriter).
func run(args []string, stdout, stderr io.Writer) int {
	out := errwriter.New(stdout)
	status := runTool(args, out, stderr)
	if err := out.Err(); err != nil {
		fmt.Fprintf(stderr, "perftest: writing the report: %v\n", err)
		return 1
	}
	return status
}

// runTool is run without the check of the report's writes.
func runTool(args []string, stdout, stderr io.Writer) int {
	if os.Getenv(envMallocs) == "1" {
		runtime.MemProfileRate = 1 // see loopAllocs
	}
	if v := os.Getenv(envTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "perftest: %s=%q is no positive duration\n", envTimeout, v)
			return 1
		}
		exchangeTimeout, stallLimit = d, d
	}
	t, ok := testByName(args[0])
	rest := args[1:]
	if !ok {
		if len(rest) == 0 {
			fmt.Fprintln(stderr, "usage: perftest <ib_send_bw|ib_send_lat|ib_write_bw|ib_write_lat|ib_read_bw|ib_read_lat|ib_atomic_bw|ib_atomic_lat> [options] [host]")
			return 1
		}
		if t, ok = testByName(rest[0]); !ok {
			fmt.Fprintf(stderr, "perftest: unknown test %q\n", rest[0])
			return 1
		}
		rest = rest[1:]
	}
	o, err := parseOptions(t, rest, stdout)
	switch {
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errExit):
		return 1
	case err != nil:
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, " Parser function exited with Error")
		return 1
	}
	if err := runTest(o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// printUsage prints the options this tool takes.
func printUsage(w io.Writer, t test) {
	fmt.Fprintf(w, "Usage:\n  %s            start a server and wait for connection\n  %s <host>     connect to server at <host>\n\n", t.name, t.name)
	fmt.Fprint(w, `Options:
  -a, --all  Run sizes from 2 till 2^23
  -A, --atomic_type=<type>  type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)
  -b, --bidirectional  Measure bidirectional bandwidth (default unidirectional)
  -c, --connection=<RC/UC/UD>  Connection type RC/UC/UD (default RC)
  -C, --report-cycles  report times in cpu cycle units (the CPU's counter, or nanoseconds where it is not used)
  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)
  -D, --duration  Run test for a customized period of seconds.
  -e, --events  Sleep on CQ events (default poll)
  -f, --margin  measure results within margins. (default=2sec)
  -F, --CPU-freq  Do not show a warning even if cpufreq_ondemand module is loaded
  -h, --help  Show this help screen.
  -H, --report-histogrm  Print out all results (default print summary only)
  -i, --ib-port=<port>  Use port <port> of IB device (default 1)
  -I, --inline_size=<size>  Max size of message to be sent in inline
  -l, --post_list=<list size>  Post list of WQEs of <list size> size (instead of single post)
  -L, --hop_limit=<hop_limit>  IPv6 Hop limit
  -m, --mtu=<mtu>  MTU size : 256 - 4096 (default port mtu)
  -n, --iters=<iters>  Number of exchanges (at least 5, default 1000)
  -N, --noPeak  Cancel peak-bw calculation (default with peak up to iters=20000)
  -o, --outs=<num>  num of outstanding read/atom(default max of device)
  -p, --port=<port>  Listen on/connect to port <port> (default 18515)
  -q, --qp=<num of qp's>  Num of qp's(default 1)
  -Q, --cq-mod  Generate Cqe only after <--cq-mod> completion
  -r, --rx-depth=<dep>  Rx queue size (default 512).
  -s, --size=<size>  Size of message to exchange (default 65536)
  -S, --sl=<sl>  SL (default 0)
  -t, --tx-depth=<dep>  Size of tx queue (default 128)
  -u, --qp-timeout=<timeout>  QP timeout, timeout value is 4 usec * 2 ^(timeout), default 14
  -U, --report-unsorted  (implies -H) print out unsorted results (default sorted)
  -V, --version  Display version number
  -x, --gid-index=<index>  Test uses GID with GID index
      --dont_xchg_versions  Do not exchange versions and MTU with other side
      --output=<units>  Set verbosity output level: bandwidth , message_rate, latency
      --report_gbits  Report Max/Average BW of test in Gbit/sec (instead of MiB/sec)
      --run_infinitely  Run test forever, print results every <duration> seconds
      --tclass=<value>  Set the Traffic Class in GRH (if GRH is in use)
`)
}
