package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

func TestParseAddr(t *testing.T) {
	ctx := context.Background()
	for in, want := range map[string]string{
		"10.99.0.1:7174": "10.99.0.1:7174",
		"[fe80::1]:1":    "[fe80::1]:1",
		":18515":         "0.0.0.0:18515",
		"localhost:9":    "127.0.0.1:9",
	} {
		got, err := parseAddr(ctx, in)
		if err != nil || got != netip.MustParseAddrPort(want) {
			t.Errorf("parseAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"10.99.0.1", "10.99.0.1:70000", "no.such.host.invalid:1"} {
		if _, err := parseAddr(ctx, bad); err == nil {
			t.Errorf("parseAddr(%q) accepted", bad)
		}
	}
}

// Too much private data is refused before the CM device is even opened.
func TestPrivateDataRefusedLocally(t *testing.T) {
	ctx := context.Background()
	_, err := Dial(ctx, "10.99.0.1:1", Options{PrivateData: make([]byte, MaxPrivateDataREQ+1)})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "57 bytes") {
		t.Errorf("Dial with 57 bytes: %v, want EINVAL naming the size", err)
	}
	_, err = DialUD(ctx, "10.99.0.1:1", Options{PrivateData: make([]byte, MaxPrivateDataSIDRREQ+1)})
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("DialUD with %d bytes: %v, want EINVAL", MaxPrivateDataSIDRREQ+1, err)
	}
}

func TestErrors(t *testing.T) {
	re := &RejectError{Addr: "10.99.0.1:7174", Reason: RejectConsumer, PrivateData: []byte("x")}
	if !errors.Is(re, unix.ECONNREFUSED) || !strings.Contains(re.Error(), "reason 28 (by the listening application)") {
		t.Errorf("RejectError: %v", re)
	}
	ee := &EventError{Op: "resolve address", Addr: "10.99.0.77:1", Event: EventAddrError, Status: -int32(unix.ENODEV)}
	if !errors.Is(ee, unix.ENODEV) || !strings.Contains(ee.Error(), "10.99.0.77:1") || !strings.Contains(ee.Error(), "no RDMA device") {
		t.Errorf("EventError: %v", ee)
	}
	ee = &EventError{Op: "connect", Addr: "a", Event: EventUnreachable, Status: -int32(unix.ETIMEDOUT)}
	if !errors.Is(ee, unix.ETIMEDOUT) || ee.Error() != "rdmacm: connect a: UNREACHABLE: connection timed out" {
		t.Errorf("EventError: %q", ee)
	}
	if w := wrapStep("listen", "b", ee); w != error(ee) {
		t.Errorf("wrapStep rewrapped an EventError: %v", w)
	}
}

func TestOptionDefaults(t *testing.T) {
	var o Options
	if o.retry() != 6 || o.rnr() != 7 || o.resolveTimeout() != defaultResolveTimeout {
		t.Errorf("defaults retry %d rnr %d timeout %v", o.retry(), o.rnr(), o.resolveTimeout())
	}
	o = Options{RetryCount: 7, RNRRetryCount: 3}
	if o.retry() != 7 || o.rnr() != 3 {
		t.Errorf("set retry %d rnr %d", o.retry(), o.rnr())
	}
}

// A Route's misuse fails without reaching the kernel: too much private
// data (in Resolve and in ConnectQP), a nil QP, a second connect, a
// connect after Close; Close is idempotent.
func TestRouteMisuse(t *testing.T) {
	ctx := context.Background()
	if _, err := Resolve(ctx, "10.99.0.1:1", Options{PrivateData: make([]byte, MaxPrivateDataREQ+1)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Resolve with 57 bytes: %v, want EINVAL", err)
	}
	r := &Route{c: &Conn{}}
	if _, err := r.ConnectQP(ctx, nil, Options{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ConnectQP(nil): %v, want EINVAL", err)
	}
	if _, err := r.ConnectQP(ctx, new(qp.QP), Options{PrivateData: make([]byte, MaxPrivateDataREQ+1)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ConnectQP with 57 bytes: %v, want EINVAL", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := r.ConnectQP(ctx, new(qp.QP), Options{}); !errors.Is(err, ErrClosed) {
		t.Errorf("ConnectQP after Close: %v, want ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Context after Close is the context the connection ran on (closed with
// the device's last holder), not a nil dereference; Close lets go of its
// hold on the device once, however often it is called.
func TestConnContextAfterClose(t *testing.T) {
	d := &device{guid: 1, ctx: new(uverbs.Context), refs: 2} // another holder keeps it open
	c := &Conn{dev: d, devHeld: true}
	for range 2 {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got := c.Context(); got != d.ctx {
			t.Fatalf("Context after Close = %p, want the device's %p", got, d.ctx)
		}
	}
	if d.refs != 1 {
		t.Fatalf("the device has %d holders after the Conn's Close, want 1", d.refs)
	}
}
