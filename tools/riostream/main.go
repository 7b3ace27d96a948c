// Command riostream is librdmacm's riostream example in pure Go: the same
// options, exchange, data pattern and result table, over pureverbs'
// rsockets (qp/rsocket) and their iomap extension, so that either end can
// be the C tool.
//
//	riostream [-b bind] [-f ip|ipv6|name] [-B size] [-i inline] [-I iterations]
//	          [-C transfers] [-S size|all] [-p port] [-T a|b|n|v]
//	riostream -s server ...
//
// Without -s it is the server. Each test maps its -S byte buffer for the
// peer's direct writes (riomap at offset 0) and starts with a 16-byte
// sync sent the ordinary way (the client first). Per iteration the client
// writes the buffer -C times straight into the server's (riowrite), the
// last time with a marker in the last byte; the server spins on its last
// byte until the marker arrives, then does the same back. With -T v the
// last write of each turn carries a running byte counter in all but the
// last byte, which the receiver checks. Without -I, -C or -S the run is
// the C tool's default (latency then bandwidth connections at 64 B, 4 KiB,
// 64 KiB and 1 MiB). Unlike the C client, -b binds the client too. -T n
// (the default), -T b and -T a choose the calls as in rstream (see
// streamperf.Calls); the receiver's spin on its last byte is the same in
// every mode.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/pureverbs/pureverbs/tools/internal/streamperf"
	"golang.org/x/sys/unix"
)

func main() {
	out, flush := streamperf.Stdout()
	// riostream.c sets RDMA_IOMAPSIZE 1 on every socket.
	code := run(context.Background(), os.Args, out, os.Stderr, iomapNetwork{streamperf.RSocket{Log: out, IOMapSize: 1}})
	if err := flush(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stdout: %v\n", os.Args[0], err)
		code = 1
	}
	os.Exit(code)
}

// iomapper is the iomap extension of an rsocket connection as riostream
// uses it.
type iomapper interface {
	// IOMap offers the peer a window of size bytes at offset 0 for its
	// direct writes (riomap with PROT_WRITE); the window's bytes are also
	// the buffer riostream sends from.
	IOMap(size int) (window, error)
	// IOWrite writes p into the peer's window at off, returning how much
	// it wrote (riowrite).
	IOWrite(p []byte, off int64) (int, error)
}

// window is a mapped buffer.
type window interface {
	Bytes() []byte
	// LastByte reads the window's last byte as the peer's writes leave it
	// (riostream's volatile poll_byte).
	LastByte() byte
	// Close withdraws the window (riounmap).
	Close() error
}

// maxBuffer bounds -S: the C tool mallocs whatever it is given.
const maxBuffer = 1 << 30

func run(ctx context.Context, args []string, stdout, stderr io.Writer, nw streamperf.Network) int {
	tool := streamperf.Tool{Name: args[0]}
	o, err := tool.Parse(args[1:], stdout, stderr)
	if err == streamperf.ErrUsage {
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
		return 1
	}
	if o.BufferLen() > maxBuffer {
		fmt.Fprintln(stderr, "malloc: Cannot allocate memory")
		return 255
	}
	pattern := new(streamperf.Pattern)
	r := &streamperf.Runner{Options: o, Network: nw, Out: stdout, Err: stderr}
	r.Test = func(_ context.Context, c net.Conn, t streamperf.Test) (time.Duration, error) {
		iom, ok := c.(iomapper)
		if !ok {
			fmt.Fprintf(stderr, "riomap: %s\n", streamperf.Strerror(unix.EOPNOTSUPP))
			return 0, unix.EOPNOTSUPP
		}
		return test(c, iom, streamperf.CallsOf(o), o.Server != "", o.Verify, pattern, t, stdout, stderr)
	}
	return r.Run(ctx)
}

// test is riostream's run_test.
func test(c net.Conn, iom iomapper, calls streamperf.Calls, client, verify bool, pattern *streamperf.Pattern, t streamperf.Test, stdout, stderr io.Writer) (time.Duration, error) {
	if t.Size < 1 {
		fmt.Fprintf(stderr, "riomap: %s\n", streamperf.Strerror(unix.EINVAL))
		return 0, unix.EINVAL
	}
	w, err := iom.IOMap(t.Size)
	if err != nil {
		fmt.Fprintf(stderr, "riomap: %s\n", streamperf.Strerror(err))
		return 0, err
	}
	elapsed, err := exchange(c, iom, calls, w, client, verify, pattern, t, stdout, stderr)
	if cerr := w.Close(); cerr != nil && err == nil {
		fmt.Fprintf(stderr, "riounmap: %s\n", streamperf.Strerror(cerr))
		err = cerr
	}
	return elapsed, err
}

// exchange runs the sync and the iterations over a mapped window.
func exchange(c net.Conn, iom iomapper, calls streamperf.Calls, w window, client, verify bool, pattern *streamperf.Pattern, t streamperf.Test, stdout, stderr io.Writer) (time.Duration, error) {
	buf := w.Bytes()
	last := t.Size - 1
	// Before the peer can write (its first write follows the sync), as the
	// C tool's *poll_byte = -1 before riomap.
	buf[last] = 0xff
	// The sync has a buffer of its own: through the window (as the C
	// tool's goes) it would overwrite the marker of a buffer of 16 bytes
	// or less.
	s := &streamperf.Stream{Conn: c, Buf: make([]byte, streamperf.SyncSize), Out: stdout, Err: stderr, Calls: calls}
	if err := streamperf.Sync(client, s.SendMsg, s.RecvMsg); err != nil {
		return 0, err
	}
	var marker byte
	send := func() error {
		for range t.Count - 1 {
			if err := write(c, iom, calls, buf[:t.Size], stderr); err != nil {
				return err
			}
		}
		buf[last] = marker
		marker++
		if verify {
			pattern.Fill(buf[:last])
		}
		return write(c, iom, calls, buf[:t.Size], stderr)
	}
	recv := func() error {
		if err := await(c, w, marker, stderr); err != nil {
			return err
		}
		marker++
		if verify {
			if err := pattern.Check(buf[:last]); err != nil {
				fmt.Fprintln(stdout, err)
				return err
			}
		}
		return nil
	}
	first, second := recv, send
	if client {
		first, second = send, recv
	}
	start := time.Now()
	for range t.Iterations {
		if err := first(); err != nil {
			return 0, err
		}
		if err := second(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// probeEvery is how often a spinning receiver checks that the peer is
// still there.
const probeEvery = 10 * time.Millisecond

// await spins until the window's last byte is marker (riostream's
// recv_xfer). Nothing but the peer's writes changes that byte, so the
// C tool spins forever once the peer is gone; this one reads the stream
// now and then with a deadline already past, and gives up on the end of
// the stream or on data, which the protocol never sends here.
func await(c net.Conn, w window, marker byte, stderr io.Writer) error {
	last := time.Now()
	for spins := 1; w.LastByte() != marker; spins++ {
		runtime.Gosched()
		if spins%4096 != 0 || time.Since(last) < probeEvery {
			continue
		}
		last = time.Now()
		if err := probe(c); err != nil {
			fmt.Fprintf(stderr, "rrecv: %s\n", streamperf.Strerror(err))
			return err
		}
	}
	return nil
}

// probe reads c without waiting: nil when nothing is there.
func probe(c net.Conn) error {
	if err := c.SetReadDeadline(time.Now()); err != nil {
		return err
	}
	var b [1]byte
	n, err := c.Read(b[:])
	if derr := c.SetReadDeadline(time.Time{}); derr != nil {
		return derr
	}
	switch {
	case n > 0:
		return unix.EPROTO
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil
	case err == nil:
		return unix.EPROTO
	}
	return err
}

// write is riostream's send_xfer: the whole buffer into the peer's window
// at the same offsets, by non-blocking calls unless -T b (see
// streamperf.Calls): each gives up SpinTick after it would wait, and the
// next starts again at rsocket's first message size, as riowrite with
// MSG_DONTWAIT does.
func write(c net.Conn, iom iomapper, calls streamperf.Calls, b []byte, stderr io.Writer) error {
	for off := 0; off < len(b); {
		if calls.NonBlocking {
			if err := c.SetWriteDeadline(time.Now().Add(streamperf.SpinTick)); err != nil {
				fmt.Fprintf(stderr, "riowrite: %s\n", streamperf.Strerror(err))
				return err
			}
		}
		n, err := iom.IOWrite(b[off:], int64(off))
		off += n
		if err != nil && !(calls.NonBlocking && errors.Is(err, os.ErrDeadlineExceeded)) {
			fmt.Fprintf(stderr, "riowrite: %s\n", streamperf.Strerror(err))
			return err
		}
	}
	if calls.NonBlocking {
		return c.SetWriteDeadline(time.Time{})
	}
	return nil
}
