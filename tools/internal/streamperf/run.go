package streamperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// Network opens a run's connections: TCP sockets for -T s, rsockets
// otherwise.
type Network interface {
	// Listen listens where the server's options say (-b, -p).
	Listen(ctx context.Context, o *Options) (net.Listener, error)
	// Dial connects to the server (-s, -p) from -b, with the rsocket
	// inline size inline (-1: the library's default).
	Dial(ctx context.Context, o *Options, inline int) (net.Conn, error)
}

// A TestFunc runs one test on c, sync included, and returns its time
// (the transfers only, as the C tools time them). It reports its own
// failures on the Runner's outputs before returning an error.
type TestFunc func(ctx context.Context, c net.Conn, t Test) (time.Duration, error)

// Runner is one run of a tool: the C tools' run().
type Runner struct {
	Options  *Options
	Network  Network
	Out, Err io.Writer // stdout (the table, C's printf lines) and stderr (perror lines)
	Test     TestFunc
}

// Run makes the run and returns the exit status the C tool would: 0, or
// 255 when connecting failed or the custom test failed (254 or 253 when
// the name lookup did, getaddrinfo's EAI_NONAME or EAI_AGAIN). As in the C
// tools,
// a failed test of the default runs does not change the status; the Go
// tools stop that connection's tests there instead of running the rest on
// a stream out of step.
func (r *Runner) Run(ctx context.Context) int {
	o := r.Options
	var ln net.Listener
	if o.Server == "" {
		var err error
		if ln, err = r.Network.Listen(ctx, o); err != nil {
			return r.failed("rbind", err)
		}
		defer ln.Close()
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
	}
	fmt.Fprint(r.Out, Header)
	status := 0
	for _, conn := range o.Plan() {
		c, err := r.connect(ctx, ln, conn.Inline)
		if err != nil {
			return r.failed(map[bool]string{true: "raccept", false: "rconnect"}[ln != nil], err)
		}
		passed := true
		for _, t := range conn.Tests {
			elapsed, err := r.Test(ctx, c, t)
			if err != nil {
				if o.Custom {
					status = 255
				}
				passed = false
				break
			}
			fmt.Fprint(r.Out, PerfLine(t, elapsed))
		}
		if ln != nil && passed {
			awaitClose(c)
		}
		// The C tools ignore rclose's result; it is reported here, the
		// status kept theirs.
		if err := c.Close(); err != nil {
			r.perror("rclose", err)
		}
	}
	return status
}

// closeWait bounds how long a server waits for the client to close first.
const closeWait = 2 * time.Second

// awaitClose waits, up to closeWait, for the client to close the
// connection after the last test, dropping anything it still sends. The C
// server closes at once, and a C client under -T a then often fails: its
// poll reports the disconnect (POLLHUP, librdmacm/rsocket.c:3256) with the
// last transfer still unread, and its do_poll gives up on POLLHUP even
// beside POLLIN (librdmacm/examples/common.c:171). Closing second costs a
// client that closes nothing.
func awaitClose(c net.Conn) {
	if c.SetReadDeadline(time.Now().Add(closeWait)) != nil {
		return
	}
	io.Copy(io.Discard, c)
}

// connect is the C tools' server_connect or client_connect.
func (r *Runner) connect(ctx context.Context, ln net.Listener, inline int) (net.Conn, error) {
	if ln != nil {
		return ln.Accept()
	}
	return r.Network.Dial(ctx, r.Options, inline)
}

// failed reports a failure to listen or connect as the C tools do and
// returns their exit status: a failed name lookup is getaddrinfo's line on
// stdout and its (negative) error code, anything else op's perror line
// and -1.
func (r *Runner) failed(op string, err error) int {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsNotFound {
			fmt.Fprintln(r.Out, "getaddrinfo: Name or service not known")
			return 254 // EAI_NONAME
		}
		fmt.Fprintln(r.Out, "getaddrinfo: Temporary failure in name resolution")
		return 253 // EAI_AGAIN
	}
	r.perror(op, err)
	return 255
}

// perror writes "op: reason" to stderr the way C's perror words it: the
// errno's text capitalised as glibc's strerror has it.
func (r *Runner) perror(op string, err error) {
	fmt.Fprintf(r.Err, "%s: %s\n", op, Strerror(err))
}

// Strerror is err's reason as glibc's strerror would give it for the
// errno inside err ("Connection refused"); the end of the stream reads as
// a reset connection, the errno rsockets give a send after the peer left;
// other errors keep their own text.
func Strerror(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		s := errno.Error()
		r, n := utf8.DecodeRuneInString(s)
		return string(unicode.ToUpper(r)) + s[n:]
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "Connection reset by peer"
	}
	return err.Error()
}

// Stream moves a test's data over one connection: the C tools' send and
// receive loops, with -T v's pattern and the calls of -T n, -T b and -T a.
type Stream struct {
	Conn    net.Conn
	Buf     []byte
	Verify  bool      // -T v
	Pattern *Pattern  // shared by every test of a run, as the C tools' counters are
	Out     io.Writer // where a verification failure is reported (stdout, as C's printf)
	Err     io.Writer // where a failed call is reported (stderr, as C's perror)
	Calls   Calls
}

// Calls is how a Stream calls its connection, as the C tools' -T options
// make theirs call rsend and rrecv. A net.Conn has no MSG_DONTWAIT and no
// poll: a call that returns rather than wait is one with a deadline
// SpinTick ahead, its timeout the C tools' EAGAIN.
type Calls struct {
	// NonBlocking is the default and -T n: every send and receive is
	// such a call, repeated until the transfer is done, as the C tools
	// spin on EAGAIN. A send that cannot go on returns what it wrote and
	// the next starts again at rsocket's first (2 KiB) message, as the C
	// tools' next rsend does. Off (-T b): one blocking write of the whole
	// transfer and reads until it has all arrived (MSG_WAITALL).
	NonBlocking bool
	// Async (-T a) polls before each call: with NonBlocking, a receive
	// waits for data without a deadline (poll's POLLIN) and takes what
	// has arrived; sends stay as NonBlocking's (poll's POLLOUT and a
	// send that stops when it would wait). Blocking calls wait anyway.
	Async bool
}

// CallsOf returns the calls o's -T options ask for.
func CallsOf(o *Options) Calls { return Calls{NonBlocking: o.DontWait, Async: o.Async} }

// SpinTick is how far ahead a non-blocking call's deadline is: long
// enough that the call reaches the connection before it passes (a passed
// deadline fails a call before it tries), short enough to stand for
// "would block".
const SpinTick = time.Millisecond

// spin runs call, which sets its own deadline SpinTick ahead, until it
// has moved size bytes, counting a timeout as EAGAIN.
func spin(size int, call func(off int) (int, error)) error {
	for off := 0; off < size; {
		n, err := call(off)
		off += n
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
	}
	return nil
}

// Write writes b to c as calls says, returning the first error that is
// not a non-blocking call's timeout.
func (calls Calls) Write(c net.Conn, b []byte) error {
	if !calls.NonBlocking {
		_, err := c.Write(b)
		return err
	}
	err := spin(len(b), func(off int) (int, error) {
		if err := c.SetWriteDeadline(time.Now().Add(SpinTick)); err != nil {
			return 0, err
		}
		return c.Write(b[off:])
	})
	if derr := c.SetWriteDeadline(time.Time{}); err == nil {
		err = derr
	}
	return err
}

// Read fills b from c as calls says.
func (calls Calls) Read(c net.Conn, b []byte) error {
	if !calls.NonBlocking || calls.Async {
		_, err := io.ReadFull(c, b)
		return err
	}
	err := spin(len(b), func(off int) (int, error) {
		if err := c.SetReadDeadline(time.Now().Add(SpinTick)); err != nil {
			return 0, err
		}
		n, err := c.Read(b[off:])
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	})
	if derr := c.SetReadDeadline(time.Time{}); err == nil {
		err = derr
	}
	return err
}

// Send writes the first size bytes of the buffer, filled with the
// pattern first under -T v (rstream's send_xfer).
func (s *Stream) Send(size int) error {
	b := s.Buf[:size]
	if s.Verify {
		s.Pattern.Fill(b)
	}
	return s.SendMsg(size)
}

// SendMsg writes the first size bytes of the buffer as they are
// (riostream's send_msg).
func (s *Stream) SendMsg(size int) error {
	if err := s.Calls.Write(s.Conn, s.Buf[:size]); err != nil {
		fmt.Fprintf(s.Err, "rsend: %s\n", Strerror(err))
		return err
	}
	return nil
}

// Recv reads size bytes into the buffer and checks them under -T v
// (rstream's recv_xfer).
func (s *Stream) Recv(size int) error {
	if err := s.RecvMsg(size); err != nil {
		return err
	}
	if s.Verify {
		if err := s.Pattern.Check(s.Buf[:size]); err != nil {
			fmt.Fprintln(s.Out, err)
			return err
		}
	}
	return nil
}

// RecvMsg reads size bytes into the buffer (riostream's recv_msg).
func (s *Stream) RecvMsg(size int) error {
	if err := s.Calls.Read(s.Conn, s.Buf[:size]); err != nil {
		fmt.Fprintf(s.Err, "rrecv: %s\n", Strerror(err))
		return err
	}
	return nil
}

// Sync is the 16-byte exchange before each test: the client sends, the
// server answers; send and recv are the tool's own calls for it.
func Sync(client bool, send, recv func(int) error) error {
	first, second := recv, send
	if client {
		first, second = send, recv
	}
	if err := first(SyncSize); err != nil {
		return err
	}
	return second(SyncSize)
}
