//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"golang.org/x/sys/unix"
)

// A port nobody listens on: the remote CM rejects at once with reason 8.
func TestCMNoListener(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := rdmacm.Dial(ctx, "10.99.0.1:7698", rdmacm.Options{Source: cmAddr1})
	var re *rdmacm.RejectError
	if !errors.As(err, &re) || re.Reason != rdmacm.RejectNoListener || !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("dial with no listener: %v, want a RejectError with reason 8 matching ECONNREFUSED", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the rejection took %v", took)
	}
	if !strings.Contains(err.Error(), "10.99.0.1:7698") {
		t.Errorf("error %q does not name the address", err)
	}
}

// A listener that rejects with private data: the Go client gets reason 28
// and the data, the C client (rping) reports the REJECTED event with 28.
func TestCMRejectWithPrivateData(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7697", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reason := []byte("go away: server full")
	go func() {
		for {
			r, err := l.Request(ctx)
			if err != nil {
				return
			}
			r.Reject(reason)
		}
	}()
	_, err = rdmacm.Dial(ctx, "10.99.0.1:7697", rdmacm.Options{Source: cmAddr1})
	var re *rdmacm.RejectError
	if !errors.As(err, &re) || re.Reason != rdmacm.RejectConsumer {
		t.Fatalf("dial: %v, want a RejectError with reason 28", err)
	}
	if !bytes.HasPrefix(re.PrivateData, reason) || len(re.PrivateData) != rdmacm.MaxPrivateDataREJ {
		t.Errorf("REJ private data %q (%d bytes), want %q first in %d", re.PrivateData, len(re.PrivateData), reason, rdmacm.MaxPrivateDataREJ)
	}
	p := startPeer(t, 30*time.Second, "/usr/bin/rping", "-c", "-I", "10.99.0.2", "-a", "10.99.0.1", "-p", "7697", "-C", "1")
	<-p.done
	if out := p.out.String(); p.err == nil || !strings.Contains(out, "RDMA_CM_EVENT_REJECTED, error 28") {
		t.Errorf("C rping against a rejecting listener: %v\n%s", p.err, out)
	}
	// A REJ holds 148 bytes: more is refused before anything is sent.
	r := &rdmacm.Request{}
	if err := r.Reject(make([]byte, rdmacm.MaxPrivateDataREJ+1)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("reject with 149 bytes: %v, want EINVAL", err)
	}
}

// 56 bytes of REQ private data arrive intact; 57 are refused before
// anything reaches the wire (the listener sees no request).
func TestCMPrivateDataLimit(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7696", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := make([]byte, rdmacm.MaxPrivateDataREQ)
	for i := range data {
		data[i] = byte(0xA0 + i)
	}
	got := make(chan []byte, 1)
	go func() {
		r, err := l.Request(ctx)
		if err != nil {
			got <- nil
			return
		}
		got <- r.PrivateData()
		r.Reject(nil)
	}()
	_, err = rdmacm.Dial(ctx, "10.99.0.1:7696", rdmacm.Options{Source: cmAddr1, PrivateData: data})
	if !errors.As(err, new(*rdmacm.RejectError)) {
		t.Fatalf("dial: %v, want the rejection", err)
	}
	if g := <-got; !bytes.Equal(g, data) {
		t.Errorf("listener got % x, want % x", g, data)
	}
	_, err = rdmacm.Dial(ctx, "10.99.0.1:7696", rdmacm.Options{Source: cmAddr1, PrivateData: make([]byte, rdmacm.MaxPrivateDataREQ+1)})
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("dial with 57 bytes: %v, want EINVAL", err)
	}
	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if r, err := l.Request(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the listener saw %v, %v after a refused dial; want nothing", r, err)
	}
}

// Resolving an address no RDMA device can reach fails with an error that
// names the address; so does a source address nobody has.
func TestCMResolveNoDevice(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		addr string
		o    rdmacm.Options
		what string
	}{
		{"127.0.0.1:7695", rdmacm.Options{}, "127.0.0.1"},
		{"192.0.2.1:7695", rdmacm.Options{ResolveTimeout: time.Second}, "192.0.2.1"},
		{"10.99.0.1:7695", rdmacm.Options{Source: netip4("10.99.9.9")}, "10.99.0.1"},
	} {
		start := time.Now()
		c, err := rdmacm.Dial(ctx, tc.addr, tc.o)
		if err == nil {
			c.Close()
			t.Errorf("dial %s (source %v) succeeded", tc.addr, tc.o.Source)
			continue
		}
		t.Logf("dial %s (source %v): %v (%v)", tc.addr, tc.o.Source, err, time.Since(start).Round(time.Millisecond))
		if !strings.Contains(err.Error(), tc.what) {
			t.Errorf("error %q does not name %s", err, tc.what)
		}
		var errno unix.Errno
		if !errors.As(err, &errno) {
			t.Errorf("error %q carries no errno", err)
		}
	}
}

// A peer killed with SIGKILL while connected: the survivor's WaitEvent
// reports DISCONNECTED (the dead process's ids are destroyed by the kernel,
// which sends the DREQ) and its QP is flushed, within bounds. Then the
// other way, mid-transfer: a C rping client pinging 8 KiB buffers without
// end is killed while the Go rping server's READs and WRITEs flow; the
// server (-d) reports the DISCONNECTED event and the flushed completion
// that ends its wait, and exits. With Conn.WaitEvent's flush removed, the
// server waited forever and this failed at its 40 s bound.
func TestCMPeerKilled(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPeer(t, 80*time.Second, "/usr/bin/rping", "-s", "-a", "10.99.0.1", "-p", "7694", "-C", "0")
	var m *cmMessages
	c := dialRetry(t, ctx, "10.99.0.1:7694", withMessages(t, rdmacm.Options{Source: cmAddr1}, &m, 4, 64))
	defer c.Close()
	defer m.close()
	time.Sleep(500 * time.Millisecond)
	srv.cmd.Process.Signal(syscall.SIGKILL)
	<-srv.done
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	ev, err := c.WaitEvent(wctx)
	if err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Fatalf("after the peer's SIGKILL: %v, %v; want DISCONNECTED", ev.Type, err)
	}
	if flushed := countFlushed(t, c.CQ(), 4); flushed != 4 {
		t.Errorf("%d of 4 posted receives flushed", flushed)
	}

	gosrv := startPeer(t, 90*time.Second, "/usr/local/bin/rping", "-s", "-a", "10.99.0.1", "-p", "7693", "-C", "0", "-S", "8192", "-vd")
	var cli *peer
	// The C client is retried until the Go server listens, and killed
	// once pings flow (the server prints each).
	for deadline := time.Now().Add(60 * time.Second); ; {
		cli = startPeer(t, 80*time.Second, "/usr/bin/rping", "-c", "-I", "10.99.0.2", "-a", "10.99.0.1", "-p", "7693", "-C", "0", "-S", "8192")
	waiting:
		for !strings.Contains(gosrv.out.String(), "server ping data: rdma-ping-3:") && time.Now().Before(deadline) {
			select {
			case <-cli.done:
				break waiting
			case <-time.After(50 * time.Millisecond):
			}
		}
		if strings.Contains(gosrv.out.String(), "server ping data: rdma-ping-3:") {
			break
		}
		<-cli.done
		if time.Now().After(deadline) {
			t.Fatalf("no pings: C client %v\n%s\nGo server:\n%s", cli.err, cli.out.String(), gosrv.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cli.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-gosrv.done:
		out := gosrv.out.String()
		if gosrv.err != nil {
			t.Errorf("Go rping server after its client's SIGKILL: %v\n%s", gosrv.err, lastLines(out, 5))
		}
		if !strings.Contains(out, "cma_event type DISCONNECTED") || !strings.Contains(out, "a completion flushed") {
			t.Errorf("the Go rping server did not report DISCONNECTED and a flushed completion:\n%s", lastLines(withoutPings(out), 5))
		}
		t.Logf("the Go server echoed %d pings before its client died", strings.Count(out, "server ping data:"))
	case <-time.After(40 * time.Second):
		t.Fatalf("the Go rping server did not end within 40 s of its client's SIGKILL:\n%s", lastLines(withoutPings(gosrv.out.String()), 5))
	}
}

// Closing a listener rejects both the request it has taken but not
// answered and the one still queued; the clients get RejectErrors, fast.
func TestCMListenerClosedWithPending(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7692", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	dial := func() {
		_, err := rdmacm.Dial(ctx, "10.99.0.1:7692", rdmacm.Options{Source: cmAddr1})
		errs <- err
	}
	go dial()
	if _, err := l.Request(ctx); err != nil {
		t.Fatal(err)
	}
	go dial()
	time.Sleep(time.Second) // the second REQ is queued on the listener
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	for range 2 {
		err := <-errs
		var re *rdmacm.RejectError
		if !errors.As(err, &re) || re.Reason != rdmacm.RejectConsumer {
			t.Errorf("pending dial: %v, want a RejectError with reason 28", err)
		}
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the pending dials ended %v after Close", took)
	}
	if _, err := l.Request(ctx); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("Request after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A context deadline ends each blocking step: address resolution (towards
// an address on the link that nobody answers ARP for), the connect (a
// listener that takes the request and never answers), the listener's wait
// and a connection's WaitEvent. Nothing leaks (TestMain checks the fds).
func TestCMContextDeadlines(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	expire := func(d time.Duration) (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, d) }

	short, stop := expire(500 * time.Millisecond)
	start := time.Now()
	_, err := rdmacm.Dial(short, "10.99.0.77:7691", rdmacm.Options{Source: cmAddr1, ResolveTimeout: 30 * time.Second})
	stop()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("resolve address: %v after %v, want the deadline", err, time.Since(start))
	}

	l, err := rdmacm.Listen(ctx, "10.99.0.1:7691", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	short, stop = expire(500 * time.Millisecond)
	if _, err := l.Request(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Request with no client: %v, want the deadline", err)
	}
	stop()
	taken := make(chan *rdmacm.Request, 1)
	go func() {
		r, _ := l.Request(ctx)
		taken <- r
	}()
	// The context ends 2 s after Setup, which runs just before the REQ
	// goes out: on a loaded VM a 2 s deadline from the start of the Dial
	// could end in address resolution, no REQ would be sent, and the
	// listener would wait for nothing (seen: the test hung 85 s here).
	connecting, stopConnect := context.WithCancel(ctx)
	var timer *time.Timer
	start = time.Now()
	_, err = rdmacm.Dial(connecting, "10.99.0.1:7691", rdmacm.Options{Source: cmAddr1, Setup: func(*rdmacm.Conn) error {
		start = time.Now()
		timer = time.AfterFunc(2*time.Second, stopConnect)
		return nil
	}})
	if timer != nil {
		timer.Stop()
	}
	stopConnect()
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "connect") || time.Since(start) > 15*time.Second {
		t.Errorf("connect to a silent listener: %v after %v, want the context's end in the connect step", err, time.Since(start))
	}
	select {
	case r := <-taken:
		if r != nil {
			r.Reject(nil)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the listener did not take the request within 30 s of the REQ")
	}

	// An established connection: WaitEvent with nothing happening.
	go func() {
		c, err := l.Accept(ctx)
		if err == nil {
			<-ctx.Done()
			c.Close()
		}
	}()
	c, err := rdmacm.Dial(ctx, "10.99.0.1:7691", rdmacm.Options{Source: cmAddr1})
	if err != nil {
		t.Fatal(err)
	}
	short, stop = expire(300 * time.Millisecond)
	if _, err := c.WaitEvent(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitEvent: %v, want the deadline", err)
	}
	stop()
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := c.WaitEvent(ctx); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("WaitEvent after Close: %v, want ErrClosed", err)
	}
	if err := c.QP().PostSend([]qp.SendWR{{Opcode: qp.Send}}); err == nil {
		t.Error("posting on a closed connection's QP succeeded")
	}
}

func netip4(s string) netip.Addr { return netip.MustParseAddr(s) }

// withoutPings is s without the lines of ping data (kilobytes each).
func withoutPings(s string) string {
	return pingLine.ReplaceAllString(s, "")
}

var pingLine = regexp.MustCompile(`(?m)^.*ping data: rdma-ping-.*\n`)

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
