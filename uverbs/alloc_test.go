package uverbs

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The hot paths go to the kernel with frames on the stack: no allocation.
func TestHotPathAllocs(t *testing.T) {
	c, _ := fakeContext(t)
	cq := &CQ{ctx: c, handle: 1}
	qp := &QP{pd: &PD{ctx: c}, handle: 2}
	for name, f := range map[string]func(){
		"ReqNotify": func() {
			if err := cq.ReqNotify(false); err != nil {
				t.Fatal(err)
			}
		},
		"PostSendDoorbell": func() {
			if err := qp.PostSendDoorbell(); err != nil {
				t.Fatal(err)
			}
		},
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s allocates %.1f times per call", name, n)
		}
	}
}

func nonblockingPipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// A completion event is struct ib_uverbs_comp_event_desc: the CQ's user
// handle. An empty channel answers EAGAIN without allocating.
func TestCompChannelReadEvent(t *testing.T) {
	r, w := nonblockingPipe(t)
	ch := &CompChannel{fd: &fileDesc{raw: r}}
	if _, err := ch.ReadEvent(); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("ReadEvent on an empty channel = %v, want EAGAIN", err)
	}
	if n := testing.AllocsPerRun(100, func() { ch.ReadEvent() }); n != 0 {
		t.Errorf("ReadEvent on an empty channel allocates %.1f times", n)
	}
	d := compEventDesc{CQHandle: 0xfeedface01}
	if _, err := unix.Write(w, unsafe.Slice((*byte)(unsafe.Pointer(&d)), unsafe.Sizeof(d))); err != nil {
		t.Fatal(err)
	}
	h, err := ch.ReadEvent()
	if err != nil || h != 0xfeedface01 {
		t.Errorf("ReadEvent = %#x, %v; want 0xfeedface01", h, err)
	}
}

func TestReadAsyncEvent(t *testing.T) {
	r, w := nonblockingPipe(t)
	c := &Context{asyncFD: &fileDesc{raw: r}}
	if _, err := c.ReadAsyncEvent(); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("ReadAsyncEvent on an empty fd = %v, want EAGAIN", err)
	}
	d := asyncEventDesc{Element: 1, EventType: uint32(EventPortActive)}
	if _, err := unix.Write(w, unsafe.Slice((*byte)(unsafe.Pointer(&d)), unsafe.Sizeof(d))); err != nil {
		t.Fatal(err)
	}
	ev, err := c.ReadAsyncEvent()
	if err != nil || ev != (AsyncEvent{Type: EventPortActive, Element: 1}) {
		t.Errorf("ReadAsyncEvent = %+v, %v", ev, err)
	}
	if got := ev.Type.String(); got != "port active" {
		t.Errorf("event name %q", got)
	}
}

// BenchmarkReqNotifyWriteOverhead is what pureverbs adds to the kernel's
// req_notify_cq: the REQ_NOTIFY_CQ command built and handed to write() on
// a file that discards it at once (/dev/null), so ns/op is the encoding
// plus a bare system call. The kernel's own cost is
// BenchmarkUverbsReqNotify in integration/ (the VM).
func BenchmarkReqNotifyWriteOverhead(b *testing.B) {
	fd, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	cq := &CQ{ctx: &Context{fd: &fileDesc{raw: fd}}, handle: 1}
	b.ReportAllocs()
	for b.Loop() {
		if err := cq.ReqNotify(false); err != nil {
			b.Fatal(err)
		}
	}
}
