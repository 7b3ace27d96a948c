//go:build linux

package netpoll

import (
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// struct epoll_params in include/uapi/linux/eventpoll.h (Linux 6.9+; the
// host's /usr/include predates it): __u32 busy_poll_usecs; __u16
// busy_poll_budget; __u8 prefer_busy_poll; __u8 __pad; 8 bytes, and
// EPIOCSPARAMS = _IOW(0x8A, 0x01, struct epoll_params) encodes that size.
func TestEpollParamsLayout(t *testing.T) {
	var p epollParams
	if s := unsafe.Sizeof(p); s != 8 {
		t.Errorf("size %d, want 8", s)
	}
	if size := uintptr(unix.EPIOCSPARAMS>>16) & 0x3fff; size != unsafe.Sizeof(p) {
		t.Errorf("EPIOCSPARAMS encodes size %d, struct is %d", size, unsafe.Sizeof(p))
	}
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"busy_poll_usecs", unsafe.Offsetof(p.BusyPollUsecs), 0},
		{"busy_poll_budget", unsafe.Offsetof(p.BusyPollBudget), 4},
		{"prefer_busy_poll", unsafe.Offsetof(p.PreferBusyPoll), 6},
		{"__pad", unsafe.Offsetof(p.pad), 7},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d, want %d", f.name, f.got, f.want)
		}
	}
}

// getEpollParams is EPIOCGPARAMS, for reading back what the kernel stored.
func getEpollParams(epfd int) (epollParams, unix.Errno) {
	var p epollParams
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(epfd), unix.EPIOCGPARAMS, uintptr(unsafe.Pointer(&p)))
	return p, e
}

// The kernel reads our struct the way we lay it out: what EPIOCSPARAMS
// stored comes back field by field, and a non-zero pad is refused.
func TestEpollParamsKernelRoundTrip(t *testing.T) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	want := epollParams{BusyPollUsecs: 0x01020304, BusyPollBudget: 33, PreferBusyPoll: 1}
	if e := setEpollParams(ep, &want); e != 0 {
		t.Fatalf("EPIOCSPARAMS: %v", busyPollError("EPIOCSPARAMS", e))
	}
	got, e := getEpollParams(ep)
	if e != 0 {
		t.Fatalf("EPIOCGPARAMS: %v", e)
	}
	if got != want {
		t.Errorf("read back %+v, set %+v", got, want)
	}
	bad := epollParams{BusyPollUsecs: 1, pad: 1}
	if e := setEpollParams(ep, &bad); e != unix.EINVAL {
		t.Errorf("non-zero pad: %v, want EINVAL", e)
	}
	// New passes the configured values through.
	d := newDriver(t, Config{Backend: EpollBusy, BusyPoll: 75 * time.Microsecond, BusyPollBudget: 16, PreferBusyPoll: true}, &recorder{})
	got, e = getEpollParams(d.ep)
	if e != 0 || got != (epollParams{BusyPollUsecs: 75, BusyPollBudget: 16, PreferBusyPoll: 1}) {
		t.Errorf("driver's epoll params %+v (%v)", got, e)
	}
	d2 := newDriver(t, Config{Backend: EpollBusy}, &recorder{})
	if got, _ := getEpollParams(d2.ep); got.BusyPollBudget != DefaultBusyPollBudget || got.BusyPollUsecs != 50 {
		t.Errorf("default epoll params %+v", got)
	}
}

// The slot index and generation we store in an epoll event come back as
// given: Fd and Pad sit at different offsets on amd64 (packed, 12 bytes)
// and arm64 (16 bytes), and we only use them by name.
func TestEpollEventData(t *testing.T) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	e, err := newEventfd()
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: 12345, Pad: -7}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, e.fd, &ev); err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 4)
	if n, errno := epollWaitNow(ep, events); n != 0 || errno != 0 {
		t.Fatalf("before signal: %d events, %v", n, errno)
	}
	e.signal()
	n, errno := epollPwait2(ep, events, &unix.Timespec{Sec: 1})
	if n != 1 || errno != 0 {
		t.Fatalf("after signal: %d events, %v", n, errno)
	}
	if events[0].Fd != 12345 || events[0].Pad != -7 || events[0].Events&unix.EPOLLIN == 0 {
		t.Errorf("event %+v", events[0])
	}
	e.reset()
	if n, _ := epollWaitNow(ep, events); n != 0 {
		t.Errorf("reset left the eventfd readable")
	}
	if runtime.GOARCH == "amd64" && unsafe.Sizeof(ev) != 12 {
		t.Errorf("amd64 epoll_event is %d bytes, want 12 (packed)", unsafe.Sizeof(ev))
	}
}

func TestPortByteOrder(t *testing.T) {
	v := hostToNet(0x1234)
	b := (*[2]byte)(unsafe.Pointer(&v))
	if b[0] != 0x12 || b[1] != 0x34 {
		t.Errorf("hostToNet(0x1234) stored % x", b[:])
	}
	if netToHost(v) != 0x1234 {
		t.Errorf("netToHost(hostToNet(0x1234)) = %#x", netToHost(v))
	}
}

// IPv6 senders are decoded, and SendTo answers them.
func TestLoopbackUDP6(t *testing.T) {
	srv, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer srv.Close()
	var d *Driver
	rec := &recorder{}
	rec.echo = func(id ConnID, p []byte, from netip.AddrPort) {
		if _, err := d.SendTo(id, p, from); err != nil {
			t.Errorf("SendTo %v: %v", from, err)
		}
	}
	d = newDriver(t, Config{Backend: EpollSpin}, rec)
	addConn(t, d, srv)
	run(t, d)
	c, err := net.DialUDP("udp6", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("six"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "six" {
		t.Fatalf("echo %q, %v", buf[:n], err)
	}
	if m := rec.messages(); len(m) != 1 || m[0].from != c.LocalAddr().(*net.UDPAddr).AddrPort() {
		t.Errorf("messages %+v, want one from %v", m, c.LocalAddr())
	}
}
