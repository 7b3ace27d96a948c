package streamperf

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// stingyConn takes at most max bytes per Write, then fails the call with a
// timeout, as a connection without credits does at its deadline; it
// records each call's deadline and size.
type stingyConn struct {
	net.Conn
	max       int
	got       bytes.Buffer
	calls     []int
	deadlines []time.Time
	deadline  time.Time
}

func (c *stingyConn) SetWriteDeadline(t time.Time) error { c.deadline = t; return nil }

func (c *stingyConn) Write(b []byte) (int, error) {
	c.calls = append(c.calls, len(b))
	c.deadlines = append(c.deadlines, c.deadline)
	if len(b) <= c.max {
		return c.got.Write(b)
	}
	c.got.Write(b[:c.max])
	return c.max, &net.OpError{Op: "write", Err: os.ErrDeadlineExceeded}
}

// A non-blocking write is repeated after each would-block timeout until
// the transfer is written, each call with a deadline SpinTick ahead; a
// blocking one is a single call without a deadline whose timeout is an
// error.
func TestCallsWrite(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100)
	c := &stingyConn{max: 300}
	before := time.Now()
	if err := (Calls{NonBlocking: true}).Write(c, data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.got.Bytes(), data) || len(c.calls) != 4 || c.calls[1] != 700 {
		t.Errorf("non-blocking: calls %v, %d bytes arrived", c.calls, c.got.Len())
	}
	for _, d := range c.deadlines {
		if d.Before(before) || d.After(time.Now().Add(SpinTick)) {
			t.Errorf("a call's deadline %v is not SpinTick ahead", d)
		}
	}
	if !c.deadline.IsZero() {
		t.Errorf("deadline left at %v", c.deadline)
	}
	c = &stingyConn{max: 300}
	if err := (Calls{}).Write(c, data); !errors.Is(err, os.ErrDeadlineExceeded) || len(c.calls) != 1 || !c.deadlines[0].IsZero() {
		t.Errorf("blocking: %v after calls %v with deadlines %v", err, c.calls, c.deadlines)
	}
}

// tcpPair returns the two ends of a loopback TCP connection: unlike
// net.Pipe's, an end's SetReadDeadline still works after the peer closed,
// as rsocket's does.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// A non-blocking read outlasts its timeouts while the data is late, and a
// stream that ends before the transfer is ErrUnexpectedEOF in every mode.
func TestCallsRead(t *testing.T) {
	for _, calls := range []Calls{{NonBlocking: true}, {NonBlocking: true, Async: true}, {}} {
		a, b := tcpPair(t)
		go func() {
			time.Sleep(20 * SpinTick)
			a.Write([]byte("late"))
			a.Write([]byte("data"))
			a.Close()
		}()
		buf := make([]byte, 8)
		if err := calls.Read(b, buf); err != nil || string(buf) != "latedata" {
			t.Errorf("%+v: %q, %v", calls, buf, err)
		}
		if err := calls.Read(b, buf); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			t.Errorf("%+v after the end: %v", calls, err)
		}
		b.Close()
	}
}
