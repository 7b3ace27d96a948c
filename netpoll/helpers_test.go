//go:build linux

package netpoll

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testConfigs is every backend shape the tests run, named as in the tables.
var testConfigs = []Config{
	{Backend: EpollSpin},
	{Backend: EpollBusy, Wait: 200 * time.Microsecond},
	{Backend: RecvBusy},
	{Backend: RecvBusy, PerQueue: true},
	// Poll-driven tests would block forever in a park without limit.
	{Backend: Park, ParkAfter: 16, Wait: 2 * time.Millisecond},
}

// message is one OnData call as the recorder saw it.
type message struct {
	id   ConnID
	data string
	from netip.AddrPort
}

// closeEvent is one OnClosed call.
type closeEvent struct {
	id     ConnID
	reason CloseReason
	err    error
}

// recorder is a Handler that keeps everything, for the functional tests.
type recorder struct {
	mu     sync.Mutex
	msgs   []message
	stream map[ConnID]*bytes.Buffer
	closes []closeEvent
	// echo, if set, is called on the loop with each datagram.
	echo func(id ConnID, p []byte, from netip.AddrPort)
}

func (r *recorder) OnData(id ConnID, p []byte, from netip.AddrPort) {
	r.mu.Lock()
	r.msgs = append(r.msgs, message{id, string(p), from})
	if r.stream == nil {
		r.stream = map[ConnID]*bytes.Buffer{}
	}
	if r.stream[id] == nil {
		r.stream[id] = &bytes.Buffer{}
	}
	r.stream[id].Write(p)
	echo := r.echo
	r.mu.Unlock()
	if echo != nil {
		echo(id, p, from)
	}
}

func (r *recorder) OnClosed(id ConnID, reason CloseReason, err error) {
	r.mu.Lock()
	r.closes = append(r.closes, closeEvent{id, reason, err})
	r.mu.Unlock()
}

func (r *recorder) messages() []message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]message(nil), r.msgs...)
}

func (r *recorder) streamBytes(id ConnID) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.stream[id]; b != nil {
		return bytes.Clone(b.Bytes())
	}
	return nil
}

func (r *recorder) closed() []closeEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]closeEvent(nil), r.closes...)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// newDriver creates a driver for cfg, skipping when a busy-poll setting
// needs a capability the test lacks, and closes it at the end.
func newDriver(t *testing.T, cfg Config, h Handler) *Driver {
	t.Helper()
	d, err := New(cfg, h)
	if errors.Is(err, ErrNeedCapNetAdmin) {
		t.Skipf("%v: %v", cfg.name(), err)
	}
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// addConn adds c, skipping like newDriver.
func addConn(t *testing.T, d *Driver, c syscall.Conn) ConnID {
	t.Helper()
	id, err := d.AddConn(c)
	if errors.Is(err, ErrNeedCapNetAdmin) {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatalf("AddConn: %v", err)
	}
	return id
}

// run runs d.Run on its own goroutine until the test's cleanup (or the
// returned stop) and checks that it returns nil promptly.
func run(t *testing.T, d *Driver) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Run did not return within 5s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// udpListen opens a UDP socket on 127.0.0.1 with an ephemeral port.
func udpListen(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// udpDial connects a UDP socket to addr.
func udpDial(t *testing.T, addr net.Addr) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp4", nil, addr.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawUDP opens a UDP socket with unix calls, bound to 127.0.0.1, and returns
// its descriptor (owned by the caller) and address.
func rawUDP(t *testing.T) (int, netip.AddrPort) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	in := sa.(*unix.SockaddrInet4)
	return fd, netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
