// Command rstream is librdmacm's rstream example in pure Go: the same
// options, exchange, data pattern and result table, over pureverbs'
// rsockets (qp/rsocket), so that either end can be the C tool.
//
//	rstream [-b bind] [-f ip|ipv6|name] [-B size] [-i inline] [-I iterations]
//	        [-C transfers] [-S size|all] [-p port] [-k seconds] [-T s|a|b|f|n|r|v]
//	rstream -s server ...
//
// Without -s it is the server. Each test starts with a 16-byte sync (the
// client sends, the server answers); a transfer is -S bytes from the
// client and -S bytes back, -C of them each way per iteration, -I
// iterations; with -T v each end fills what it sends with a running byte
// counter and checks what it receives against the peer's. Without -I, -C
// or -S the run is the C tool's default: a connection of latency tests at
// 64 B, 4 KiB, 64 KiB and 1 MiB (-S all: and the sizes between), then one
// of bandwidth tests. -T s runs over kernel TCP instead (-T f the same: the
// server does not fork). Calls are non-blocking by default and with -T n
// (a deadline 1 ms ahead, its timeout the C tool's EAGAIN, the call
// repeated, the connection polling its CQ meanwhile as the C tool spins;
// a write restarts at rsocket's 2 KiB first message, as the C
// tool's next rsend does), blocking with -T b (whole writes, MSG_WAITALL
// reads); -T a waits for data before reading, as after poll (see
// streamperf.Calls).
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/pureverbs/pureverbs/tools/internal/streamperf"
)

func main() {
	out, flush := streamperf.Stdout()
	code := run(context.Background(), os.Args, out, os.Stderr)
	if err := flush(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stdout: %v\n", os.Args[0], err)
		code = 1
	}
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	tool := streamperf.Tool{Name: args[0], Sockets: true}
	o, err := tool.Parse(args[1:], stdout, stderr)
	if err == streamperf.ErrUsage {
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
		return 1
	}
	n := o.BufferLen()
	if n > maxBuffer {
		fmt.Fprintln(stderr, "malloc: Cannot allocate memory")
		return 255
	}
	r := &streamperf.Runner{Options: o, Network: network(o, stdout), Out: stdout, Err: stderr}
	buf := make([]byte, n)
	pattern := new(streamperf.Pattern)
	r.Test = func(_ context.Context, c net.Conn, t streamperf.Test) (time.Duration, error) {
		s := &streamperf.Stream{Conn: c, Buf: buf, Verify: o.Verify, Pattern: pattern, Out: stdout, Err: stderr, Calls: streamperf.CallsOf(o)}
		return test(s, o.Server != "", t)
	}
	return r.Run(ctx)
}

// maxBuffer bounds -S: the C tool mallocs whatever it is given.
const maxBuffer = 1 << 30

// network is TCP for -T s, rsockets otherwise.
func network(o *streamperf.Options, log io.Writer) streamperf.Network {
	if o.TCP {
		return streamperf.TCP{Log: log}
	}
	return streamperf.RSocket{Log: log}
}

// test is rstream's run_test: the sync, then per iteration -C transfers
// from the client and -C back, timed from after the sync.
func test(s *streamperf.Stream, client bool, t streamperf.Test) (time.Duration, error) {
	if err := streamperf.Sync(client, s.Send, s.Recv); err != nil {
		return 0, err
	}
	first, second := s.Recv, s.Send
	if client {
		first, second = s.Send, s.Recv
	}
	start := time.Now()
	for range t.Iterations {
		for range t.Count {
			if err := first(t.Size); err != nil {
				return 0, err
			}
		}
		for range t.Count {
			if err := second(t.Size); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}
