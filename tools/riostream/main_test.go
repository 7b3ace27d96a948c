package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/pureverbs/pureverbs/tools/internal/streamperf"
	"golang.org/x/sys/unix"
)

// fakeNet joins a client and a server in the process by net.Pipe, with an
// iomap emulated in memory: IOWrite copies into the peer's window under
// the window's lock, as RDMA placement would land the bytes, and LastByte
// reads under it.
type fakeNet struct {
	accept chan net.Conn
	// corrupt, when set, flips a byte of every write the client makes.
	corrupt bool
}

type fakeWindow struct {
	mu  sync.Mutex
	buf []byte
}

func (w *fakeWindow) Bytes() []byte { return w.buf }
func (w *fakeWindow) LastByte() byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf[len(w.buf)-1]
}
func (w *fakeWindow) Close() error { return nil }

type fakeConn struct {
	net.Conn
	own     *fakeWindow
	peer    *fakeConn
	corrupt bool
	ready   chan struct{} // closed once own is mapped
}

func (c *fakeConn) IOMap(size int) (window, error) {
	c.own = &fakeWindow{buf: make([]byte, size)}
	close(c.ready)
	return c.own, nil
}

func (c *fakeConn) IOWrite(p []byte, off int64) (int, error) {
	<-c.peer.ready
	w := c.peer.own
	if off+int64(len(p)) > int64(len(w.buf)) {
		return 0, unix.EINVAL
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	copy(w.buf[off:], p)
	if c.corrupt && len(p) > 1 {
		w.buf[off] ^= 0x80
	}
	return len(p), nil
}

func (n *fakeNet) Listen(context.Context, *streamperf.Options) (net.Listener, error) {
	return n, nil
}

func (n *fakeNet) Dial(context.Context, *streamperf.Options, int) (net.Conn, error) {
	a, b := net.Pipe()
	cli := &fakeConn{Conn: a, corrupt: n.corrupt, ready: make(chan struct{})}
	srv := &fakeConn{Conn: b, ready: make(chan struct{})}
	cli.peer, srv.peer = srv, cli
	n.accept <- srv
	return cli, nil
}

func (n *fakeNet) Accept() (net.Conn, error) { return <-n.accept, nil }
func (n *fakeNet) Close() error              { return nil }
func (n *fakeNet) Addr() net.Addr            { return nil }

type result struct {
	code           int
	stdout, stderr string
}

func pair(t *testing.T, nw *fakeNet, args string) (cli, srv result) {
	t.Helper()
	ch := make(chan result, 1)
	go func() {
		var o, e bytes.Buffer
		code := run(context.Background(), append([]string{"riostream"}, strings.Fields(args)...), &o, &e, nw)
		ch <- result{code, o.String(), e.String()}
	}()
	var o, e bytes.Buffer
	code := run(context.Background(), append([]string{"riostream", "-s", "peer"}, strings.Fields(args)...), &o, &e, nw)
	return result{code, o.String(), e.String()}, <-ch
}

var row = regexp.MustCompile(`(?m)^custom +(\S+) +(\S+) +(\S+) +(\S+) +\d+\.\d\ds +\S+ +\S+$`)

// The marker exchange and -T v's pattern in the last write of each turn,
// sizes from one byte to beyond the sync's 16.
func TestExchange(t *testing.T) {
	for _, tc := range []struct{ args, fields string }{
		{"-S 4096 -C 50 -I 5 -T v", "4k 50 5 1.9m"},
		{"-S 64 -C 1 -I 300 -T v", "64 1 300 37k"}, // the marker wraps
		{"-S 1 -C 2 -I 3 -T v", "1 2 3 12"},
		{"-S 100000 -C 3 -I 2", "97k 3 2 1.1m"},
	} {
		cli, srv := pair(t, &fakeNet{accept: make(chan net.Conn, 1)}, tc.args)
		for who, r := range map[string]result{"client": cli, "server": srv} {
			m := row.FindStringSubmatch(r.stdout)
			if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, streamperf.Header) || m == nil ||
				strings.Join(m[1:], " ") != tc.fields {
				t.Errorf("%s %s: %+v; want a row of %s", who, tc.args, r, tc.fields)
			}
		}
	}
}

// A corrupted write fails the receiver's check with the C line, and the
// custom run's status is 255. The client, spinning for an answer that
// will not come, sees the server close instead of spinning forever.
func TestExchangeVerifyFails(t *testing.T) {
	cli, srv := pair(t, &fakeNet{accept: make(chan net.Conn, 1), corrupt: true}, "-S 4096 -C 2 -I 1 -T v")
	if srv.code != 255 || !strings.Contains(srv.stdout, "data verification failed byte 0\n") {
		t.Errorf("server %+v", srv)
	}
	// (net.Pipe refuses a deadline once the peer closed: "closed pipe".)
	if cli.code != 255 || !strings.HasPrefix(cli.stderr, "rrecv: ") {
		t.Errorf("client %+v", cli)
	}
}

// A connection without the iomap extension is refused as riomap would.
func TestNoIOMap(t *testing.T) {
	var stdout, stderr bytes.Buffer
	c := &plainNet{}
	go func() {
		var o, e bytes.Buffer
		run(context.Background(), []string{"riostream", "-S", "64", "-C", "1"}, &o, &e, c)
	}()
	code := run(context.Background(), []string{"riostream", "-s", "x", "-S", "64", "-C", "1"}, &stdout, &stderr, c)
	if code != 255 || stderr.String() != "riomap: Operation not supported\n" {
		t.Errorf("%d %q %q", code, stdout.String(), stderr.String())
	}
}

type plainNet struct{ fakeNet }

func (p *plainNet) Dial(context.Context, *streamperf.Options, int) (net.Conn, error) {
	a, _ := net.Pipe()
	return a, nil
}

func (p *plainNet) Listen(context.Context, *streamperf.Options) (net.Listener, error) {
	return nil, unix.EADDRINUSE
}
