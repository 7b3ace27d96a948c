//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
	"github.com/pureverbs/pureverbs/uverbs"
)

// liarMessages are a perftest peer's first messages with one lie each:
// the version (16 bytes), page size and cache line (4 bytes each,
// big-endian), the MTU enum ("3" and its NUL), then one address record
// (108 bytes) whose QP number is wider than 24 bits; version or sizes
// set to refuse stop the exchange before the MTU.
type liarMessages struct {
	version     string
	page, line  uint32
	mtu         string
	want        string // in the refusal
	needsRecord bool   // the lie is in the record (or the MTU, which is kept)
}

func (m liarMessages) messages() [][]byte {
	v := make([]byte, 16)
	copy(v, m.version)
	msgs := [][]byte{v, binary.BigEndian.AppendUint32(nil, m.page), binary.BigEndian.AppendUint32(nil, m.line)}
	mtu := make([]byte, 2)
	copy(mtu, m.mtu)
	msgs = append(msgs, mtu)
	rec := make([]byte, 108)
	copy(rec, "0000:0001:1000000:000001:00000001:0000000000001000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:63:00:02:00000000:")
	return append(msgs, rec)
}

var perftestLies = []liarMessages{
	{"6.06", 0xfffff000, 64, "3", "page size 0xfffff000", false},
	{"6.06", 4096, 8192, "3", "cache line size 0x2000", false},
	{"NaN", 4096, 64, "3", `version "NaN"`, false},
	// The MTU is kept (perftest ignores a bad one); the record then lies.
	{"6.06", 4096, 64, "-1", "QP number 0x1000000", true},
}

// A lying perftest peer, against the Go tool as server and as client, over
// TCP and over RDMA CM (-R): the tool refuses the first lie with a message
// naming the field and the value and exits non-zero, soon, without a panic
// (issue 26: the page size mapped gigabytes, the cache line divided by zero,
// the MTU panicked, "NaN" passed). Over -R a message shorter than due is
// refused by its completion's byte count.
func TestPerftestLyingPeer(t *testing.T) {
	devs := devices(t, 2)
	for _, lie := range perftestLies {
		for _, goServer := range []bool{true, false} {
			name := fmt.Sprintf("TCP/%s/Go client", lie.want)
			if goServer {
				name = fmt.Sprintf("TCP/%s/Go server", lie.want)
			}
			t.Run(name, func(t *testing.T) {
				port := 18600 + int(perftestPort.Add(1))
				g := startLiedTo(t, devs, goServer, port, nil, func() (io.Closer, error) {
					return tcpLiar(port, goServer, lie.messages())
				})
				expectRefusal(t, g, lie.want)
				if lie.needsRecord && !strings.Contains(g.out.String(), `MTU "-1" is no MTU`) {
					t.Errorf("no note of the peer's MTU:\n%s", g.out.String())
				}
			})
		}
	}
	// Over RDMA CM every message is a SEND: one lie in its content, one in
	// its length.
	for _, c := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"version NaN", append([]byte("NaN"), make([]byte, 13)...), `version "NaN"`},
		{"short version message", []byte("6.06"), "a message of 4 bytes where 16 were due"},
	} {
		for _, goServer := range []bool{true, false} {
			name := "RDMACM/" + c.name + "/Go client"
			if goServer {
				name = "RDMACM/" + c.name + "/Go server"
			}
			t.Run(name, func(t *testing.T) {
				port := 18600 + int(perftestPort.Add(1))
				g := startLiedTo(t, devs, goServer, port, []string{"-R"}, func() (io.Closer, error) {
					return cmLiar(port, goServer, c.msg)
				})
				expectRefusal(t, g, c.want)
			})
		}
	}
}

// startLiedTo starts the Go ib_send_bw (server on devs[0] or client on
// devs[1]) and the liar (listening before a Go client starts, connecting
// after a Go server listens), and returns the Go end.
func startLiedTo(t *testing.T, devs []string, goServer bool, port int, extra []string, liar func() (io.Closer, error)) *peer {
	t.Helper()
	goEnd := perftestEnd{goTool: true, env: []string{"PERFTEST_TIMEOUT=20s"}, extra: extra}
	args := []string{"-n", "100"}
	var g *peer
	var l io.Closer
	var err error
	cm := slices.Contains(extra, "-R")
	if goServer {
		g = startPerftest(t, goEnd, "ib_send_bw", devs[0], port, args, "")
		if cm {
			waitCMListening(t, g, port, 30*time.Second)
		} else {
			waitListening(t, g, port, 30*time.Second)
		}
		l, err = liar()
	} else {
		done := make(chan struct{})
		go func() {
			defer close(done)
			l, err = liar()
		}()
		if !liarListening(t, port, cm, done) { // done is closed: l and err are written
			if l != nil {
				l.Close()
			}
			t.Fatalf("the liar: %v", err)
		}
		g = startPerftest(t, goEnd, "ib_send_bw", devs[1], port, args, "10.99.0.1")
		<-done
	}
	if l != nil {
		t.Cleanup(func() { l.Close() })
	}
	if err != nil {
		<-g.done
		t.Fatalf("the liar: %v\nGo end:\n%s", err, g.out.String())
	}
	return g
}

// liarListening waits until the liar, started in the background, listens
// on port (over RDMA CM if cm, else TCP), and reports false if the liar
// returned first (done closed: it failed).
func liarListening(t *testing.T, port int, cm bool, done <-chan struct{}) bool {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var ok bool
		var err error
		if cm {
			ok, err = topology.CMListening(port, netip.Addr{})
		} else {
			ok, err = topology.Listening(port)
		}
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return true
		}
		select {
		case <-done:
			return false
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the liar does not listen on port %d after 30 s", port)
		}
	}
}

// expectRefusal waits for the Go end, which must fail with want in its
// output, within a bound, without a panic.
func expectRefusal(t *testing.T, g *peer, want string) {
	t.Helper()
	start := time.Now()
	select {
	case <-g.done:
	case <-time.After(90 * time.Second):
		g.cancel()
		<-g.done
		t.Fatalf("the Go end still runs after 90 s:\n%s", g.out.String())
	}
	out := g.out.String()
	if g.err == nil {
		t.Fatalf("the Go end succeeded:\n%s", out)
	}
	if errors.Is(g.err, context.DeadlineExceeded) {
		t.Fatalf("the Go end hung:\n%s", out)
	}
	if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
		t.Fatalf("the Go end panicked:\n%s", out)
	}
	if !strings.Contains(out, "refusing the peer's data") || !strings.Contains(out, want) {
		t.Fatalf("the Go end failed without a refusal naming %q:\n%s", want, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("refused within %v (%v): %s", time.Since(start).Round(time.Millisecond), g.err, lines[len(lines)-1])
}

// tcpLiar plays the peer over TCP: it connects to a Go server's port or
// takes the Go client's connection, writes msgs and reads what the tool
// sends until it closes.
func tcpLiar(port int, goServer bool, msgs [][]byte) (io.Closer, error) {
	var c net.Conn
	var err error
	if goServer {
		c, err = net.DialTimeout("tcp4", "10.99.0.1:"+strconv.Itoa(port), 10*time.Second)
	} else {
		var ln net.Listener
		if ln, err = net.Listen("tcp4", ":"+strconv.Itoa(port)); err != nil {
			return nil, err
		}
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(90 * time.Second))
		c, err = ln.Accept()
		ln.Close()
	}
	if err != nil {
		return nil, err
	}
	go func() {
		c.Write(bytes.Join(msgs, nil))
		io.Copy(io.Discard, c)
	}()
	return c, nil
}

// cmLiar plays the peer of -R: one RC connection over RDMA CM (it dials
// the Go server from rxe1's address, or accepts the Go client), a posted
// receive of 56 bytes as perftest posts, and msg as one SEND (after the
// Go client's first message when it is the server).
func cmLiar(port int, goServer bool, msg []byte) (io.Closer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var buf *uverbs.Buffer
	var mr *uverbs.MR
	o := rdmacm.Options{Cap: qp.Cap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	// Teardown releases a failed attempt's memory (Dial retries while the
	// Go server does not listen yet).
	release := func(*rdmacm.Conn) error {
		var errs []error
		if mr != nil {
			errs = append(errs, mr.Close())
			mr = nil
		}
		if buf != nil {
			errs = append(errs, buf.Close())
			buf = nil
		}
		return errors.Join(errs...)
	}
	o.Teardown = release
	o.Setup = func(c *rdmacm.Conn) (err error) {
		defer func() {
			if err != nil {
				err = errors.Join(err, release(c))
			}
		}()
		if buf, err = uverbs.NewBuffer(128, uverbs.BufferOptions{}); err != nil {
			return err
		}
		if mr, err = c.PD().RegisterMR(buf, uverbs.AccessLocalWrite); err != nil {
			return err
		}
		sge, err := mr.SGE(0, 56)
		if err != nil {
			return err
		}
		return c.QP().PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{sge}}})
	}
	var c *rdmacm.Conn
	var err error
	if goServer {
		o.Source = cmAddr1
		for try := 0; try < 100; try++ { // until the Go server listens
			if c, err = rdmacm.Dial(ctx, "10.99.0.1:"+strconv.Itoa(port), o); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	} else {
		var l *rdmacm.Listener
		if l, err = rdmacm.Listen(ctx, "0.0.0.0:"+strconv.Itoa(port), o); err != nil {
			return nil, err
		}
		c, err = l.Accept(ctx)
		l.Close()
	}
	if err != nil {
		return nil, err
	}
	l := &cmLiarConn{c: c, mr: mr, buf: buf}
	if !goServer {
		if _, err := l.await(true); err != nil {
			return l, fmt.Errorf("the Go client's version: %w", err)
		}
	}
	copy(buf.Bytes()[64:], msg)
	sge, err := mr.SGE(64, len(msg))
	if err == nil {
		err = c.QP().PostSend([]qp.SendWR{{ID: 2, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge}}})
	}
	if err == nil {
		_, err = l.await(false)
	}
	return l, err
}

// cmLiarConn is the liar's connection and its memory.
type cmLiarConn struct {
	c   *rdmacm.Conn
	mr  *uverbs.MR
	buf *uverbs.Buffer
}

// await polls for a receive (recv) or a send completion for a minute.
func (l *cmLiarConn) await(recv bool) (cq.WC, error) {
	var wc [1]cq.WC
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		n, err := l.c.CQ().Poll(wc[:])
		if err != nil {
			return wc[0], err
		}
		if n == 1 {
			if wc[0].Status != cq.Success {
				return wc[0], fmt.Errorf("completion status %v", wc[0].Status)
			}
			if wc[0].Opcode.IsRecv() == recv {
				return wc[0], nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return wc[0], errors.New("no completion in a minute")
}

func (l *cmLiarConn) Close() error {
	return errors.Join(l.mr.Close(), l.c.Close(), l.buf.Close())
}
