//go:build linux

package netpoll

import (
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// What each kernel answer turns into, including the answers this kernel
// cannot give (it is new enough and has busy polling).
func TestBusyPollErrorKinds(t *testing.T) {
	for _, c := range []struct {
		op      string
		errno   unix.Errno
		is      []error
		isNot   []error
		message string
	}{
		{"EPIOCSPARAMS", unix.ENOTTY, []error{ErrKernelTooOld, ErrNotSupported, unix.ENOTTY}, []error{ErrNoBusyPoll}, "Linux 6.9"},
		{"EPIOCSPARAMS", unix.EOPNOTSUPP, []error{ErrNoBusyPoll, ErrNotSupported, unix.EOPNOTSUPP}, []error{ErrKernelTooOld}, "CONFIG_NET_RX_BUSY_POLL"},
		{"EPIOCSPARAMS", unix.EPERM, []error{ErrNeedCapNetAdmin, unix.EPERM, os.ErrPermission}, []error{ErrNotSupported}, "above 64 needs CAP_NET_ADMIN"},
		{"epoll_pwait2", unix.ENOSYS, []error{ErrKernelTooOld, ErrNotSupported}, nil, "Linux 5.11"},
		{"SO_BUSY_POLL", unix.ENOPROTOOPT, []error{ErrNoBusyPoll, ErrNotSupported}, nil, "CONFIG_NET_RX_BUSY_POLL"},
		{"SO_BUSY_POLL", unix.EPERM, []error{ErrNeedCapNetAdmin}, nil, "net.core.busy_read"},
		{"EPIOCSPARAMS", unix.EINVAL, []error{unix.EINVAL}, []error{ErrNotSupported, ErrNeedCapNetAdmin}, "out of range"},
	} {
		err := busyPollError(c.op, c.errno)
		var bp *BusyPollError
		if !errors.As(err, &bp) || bp.Op != c.op || bp.Errno != c.errno {
			t.Errorf("%s %v: not a *BusyPollError with those fields: %v", c.op, c.errno, err)
			continue
		}
		for _, target := range c.is {
			if !errors.Is(err, target) {
				t.Errorf("%v: does not match %v", err, target)
			}
		}
		for _, target := range c.isNot {
			if errors.Is(err, target) {
				t.Errorf("%v: matches %v", err, target)
			}
		}
		if !strings.Contains(err.Error(), c.message) || !strings.Contains(err.Error(), c.op) {
			t.Errorf("%q lacks %q", err, c.message)
		}
	}
	if busyPollError("x", 0) != nil {
		t.Errorf("errno 0 made an error")
	}
}

// A kernel before 6.9 has no ioctl on epoll files, and the VFS answers
// ENOTTY for a file without one: an eventfd, which has none either, gives
// this kernel's genuine version of that answer to the very same call.
func TestEPIOCSPARAMSWithoutHandlerIsENOTTY(t *testing.T) {
	e, err := newEventfd()
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	p := epollParams{BusyPollUsecs: 50, BusyPollBudget: 8}
	errno := setEpollParams(e.fd, &p)
	if errno != unix.ENOTTY {
		t.Fatalf("EPIOCSPARAMS on a file without ioctl: %v, want ENOTTY", errno)
	}
	if err := busyPollError("EPIOCSPARAMS", errno); !errors.Is(err, ErrKernelTooOld) {
		t.Errorf("%v is not ErrKernelTooOld", err)
	}
}

// New reports the simulated old-kernel answers as typed errors and leaks
// nothing on the way out.
func TestNewEpollBusySimulatedKernels(t *testing.T) {
	defer func(f func(int, *epollParams) unix.Errno) { epiocsparams = f }(epiocsparams)
	for errno, want := range map[unix.Errno]error{
		unix.ENOTTY:     ErrKernelTooOld, // before Linux 6.9
		unix.EOPNOTSUPP: ErrNoBusyPoll,   // CONFIG_NET_RX_BUSY_POLL=n
	} {
		epiocsparams = func(int, *epollParams) unix.Errno { return errno }
		before := openFDs(t)
		d, err := New(Config{Backend: EpollBusy}, &recorder{})
		if d != nil || !errors.Is(err, want) || !errors.Is(err, ErrNotSupported) {
			t.Errorf("%v: New = %v, %v; want %v", errno, d, err, want)
		}
		if after := openFDs(t); after != before {
			t.Errorf("%v: %d descriptors after the failed New, %d before", errno, after, before)
		}
	}
}

// withoutCapNetAdmin runs fn on an OS thread whose effective capabilities
// lack CAP_NET_ADMIN. Capabilities are per thread; the thread is never
// unlocked, so it exits with the goroutine instead of serving others.
func withoutCapNetAdmin(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the point is to compare with and without CAP_NET_ADMIN")
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		data[unix.CAP_NET_ADMIN/32].Effective &^= 1 << (unix.CAP_NET_ADMIN % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("dropping CAP_NET_ADMIN: %v", err)
	}
}

// A budget above 64 (NAPI_POLL_WEIGHT) is the kernel's real EPERM without
// CAP_NET_ADMIN, and accepted with it.
func TestBudgetAbove64NeedsCapNetAdmin(t *testing.T) {
	cfg := Config{Backend: EpollBusy, BusyPollBudget: 65}
	var err error
	withoutCapNetAdmin(t, func() {
		var d *Driver
		if d, err = New(cfg, &recorder{}); d != nil {
			d.Close()
		}
	})
	if !errors.Is(err, ErrNeedCapNetAdmin) || !errors.Is(err, unix.EPERM) {
		t.Fatalf("without CAP_NET_ADMIN: %v, want ErrNeedCapNetAdmin (EPERM)", err)
	}
	if !strings.Contains(err.Error(), "budget above 64") {
		t.Errorf("message %q does not say why", err)
	}
	newDriver(t, cfg, &recorder{}) // as root
	withoutCapNetAdmin(t, func() {
		var d *Driver
		if d, err = New(Config{Backend: EpollBusy, BusyPollBudget: 64}, &recorder{}); d != nil {
			d.Close()
		}
	})
	if err != nil {
		t.Errorf("budget 64 without CAP_NET_ADMIN: %v", err)
	}
}

// recv-busy's SO_PREFER_BUSY_POLL, and raising SO_BUSY_POLL_BUDGET, are the
// kernel's real EPERM without CAP_NET_ADMIN (SO_BUSY_POLL itself needs no
// capability on this kernel); a refused socket stays the caller's.
func TestSocketBusyPollNeedsCapNetAdmin(t *testing.T) {
	for op, cfg := range map[string]Config{
		"SO_PREFER_BUSY_POLL": {Backend: RecvBusy, PreferBusyPoll: true},
		"SO_BUSY_POLL_BUDGET": {Backend: RecvBusy, BusyPollBudget: 8},
	} {
		d := newDriver(t, cfg, &recorder{})
		fd, _ := rawUDP(t)
		var err error
		withoutCapNetAdmin(t, func() { _, err = d.AddFD(fd) })
		var bp *BusyPollError
		if !errors.As(err, &bp) || bp.Op != op || !errors.Is(err, ErrNeedCapNetAdmin) || !errors.Is(err, unix.EPERM) {
			t.Errorf("%s: AddFD without CAP_NET_ADMIN: %v", op, err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Errorf("%s: the refused socket was closed: %v", op, err)
		}
		if _, err := d.AddFD(fd); err != nil { // with the capability
			unix.Close(fd)
			t.Errorf("%s: AddFD as root: %v", op, err)
		}
	}
}

// netpoll's sentinels are the standard library's (the one closed and the
// one not-supported value of every package here), and what it returns
// names what was refused.
func TestSentinelsAreStandardOnes(t *testing.T) {
	if ErrClosed != net.ErrClosed || ErrNotSupported != errors.ErrUnsupported {
		t.Errorf("ErrClosed %v, ErrNotSupported %v: want net.ErrClosed and errors.ErrUnsupported", ErrClosed, ErrNotSupported)
	}
	if err := busyPollError("EPIOCSPARAMS", unix.ENOTTY); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("%v does not match errors.ErrUnsupported", err)
	}
	d, err := New(Config{Backend: EpollSpin}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	for op, err := range map[string]error{"poll": d.Poll(), "run": d.Run(t.Context()), "remove": d.Remove(newConnID(0, 1))} {
		if !errors.Is(err, net.ErrClosed) || !strings.Contains(err.Error(), "netpoll: "+op) {
			t.Errorf("%s after Close: %v, want net.ErrClosed naming netpoll: %s", op, err, op)
		}
	}
	if _, err := d.AddConn(udpListen(t)); !errors.Is(err, net.ErrClosed) || !strings.Contains(err.Error(), "netpoll: add") {
		t.Errorf("add after Close: %v", err)
	}
}

// EpollBusy sets only SO_BUSY_POLL on its sockets (for the passes in which
// completion queues keep it from sleeping): its preference and budget are
// the epoll instance's, so adding a socket needs no CAP_NET_ADMIN.
func TestEpollBusyAddNeedsNoCapNetAdmin(t *testing.T) {
	d := newDriver(t, Config{Backend: EpollBusy, PreferBusyPoll: true, BusyPollBudget: 8}, &recorder{})
	fd, _ := rawUDP(t)
	var err error
	withoutCapNetAdmin(t, func() { _, err = d.AddFD(fd) })
	if err != nil {
		unix.Close(fd)
		t.Fatalf("AddFD without CAP_NET_ADMIN: %v", err)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL); err != nil || v == 0 {
		t.Errorf("SO_BUSY_POLL %d, %v: want it set", v, err)
	}
}
