package cq

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/rxe/rxesim"
	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// pipeSource plays a completion channel: events are 8-byte CQ handles
// written into a non-blocking pipe, as the kernel queues struct
// ib_uverbs_comp_event_desc. The read buffer lives in the source so that
// reading allocates nothing, even under the race detector.
type pipeSource struct {
	r, w int
	buf  [8]byte
}

func newPipeSource(t *testing.T) *pipeSource {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[1]) })
	return &pipeSource{r: p[0], w: p[1]}
}

func (p *pipeSource) FD() int { return p.r }

func (p *pipeSource) ReadEvent() (uint64, error) {
	if _, err := unix.Read(p.r, p.buf[:]); err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint64(p.buf[:]), nil
}

func (p *pipeSource) Close() error { return unix.Close(p.r) }

func (p *pipeSource) event(t *testing.T, h uint64) {
	t.Helper()
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], h)
	if _, err := unix.Write(p.w, b[:]); err != nil {
		t.Fatal(err)
	}
}

// simCQ is a CQ over a ring of the simulated kernel, which the test has
// produce completions into it.
type simCQ struct {
	*CQ
	kernel *rxesim.CQ
}

func newSimCQ(t testing.TB, entries int) simCQ {
	t.Helper()
	k, err := rxesim.New().NewCQ(entries)
	if err != nil {
		t.Fatal(err)
	}
	return simCQ{CQ: &CQ{core: k.User}, kernel: k}
}

func (s simCQ) complete(wcs ...WC) {
	for i := range wcs {
		w := &wcs[i]
		r := rxe.WC{WRID: w.WRID, Status: rxe.WCStatus(w.Status), Opcode: rxe.WCOpcode(w.Opcode), VendorErr: w.VendorErr,
			ByteLen: w.ByteLen, Imm: w.Imm, QPNum: w.QPNum, SrcQP: w.SrcQP, Flags: rxe.WCFlags(w.Flags), PKeyIndex: w.PKeyIndex,
			SLID: w.SLID, SL: w.SL, DLIDPathBits: w.DLIDPathBits, PortNum: w.PortNum}
		if !s.kernel.Complete(&r) {
			panic("simulated CQ full")
		}
	}
}

func TestPoll(t *testing.T) {
	c := newSimCQ(t, 8)
	wc := make([]WC, 4)
	if n, err := c.Poll(wc); n != 0 || err != nil {
		t.Fatalf("Poll on an empty CQ = %d, %v", n, err)
	}
	c.complete(
		WC{WRID: 1, Status: Success, Opcode: OpSend, ByteLen: 64, QPNum: 17},
		WC{WRID: 2, Status: Success, Opcode: OpRecv, ByteLen: 5, Flags: WithImm, Imm: 0xdeadbeef, QPNum: 17, SrcQP: 18},
		WC{WRID: 3, Status: WRFlushErr, Opcode: OpRecv},
	)
	n, err := c.Poll(wc[:2])
	if n != 2 || err != nil {
		t.Fatalf("Poll = %d, %v; want 2", n, err)
	}
	if wc[0].WRID != 1 || wc[0].Opcode != OpSend || wc[0].ByteLen != 64 {
		t.Errorf("first completion %+v", wc[0])
	}
	if wc[1].Imm != 0xdeadbeef || wc[1].Flags&WithImm == 0 || !wc[1].Opcode.IsRecv() || wc[1].SrcQP != 18 {
		t.Errorf("second completion %+v", wc[1])
	}
	n, _ = c.Poll(wc)
	if n != 1 || wc[0].Status != WRFlushErr || wc[0].Status.String() != "WR_FLUSH_ERR" {
		t.Errorf("third poll: %d, %+v", n, wc[0])
	}
}

// Poll and Ack are the hot path: no allocation, full or empty.
func TestPollAllocs(t *testing.T) {
	c := newSimCQ(t, 64)
	wc := make([]WC, 16)
	batch := make([]WC, 16)
	for i := range batch {
		batch[i] = WC{WRID: uint64(i), Opcode: OpRecv, ByteLen: 100}
	}
	if a := testing.AllocsPerRun(1000, func() {
		c.complete(batch...)
		if n, err := c.Poll(wc); n != 16 || err != nil {
			t.Fatalf("Poll = %d, %v", n, err)
		}
		if n, _ := c.Poll(wc); n != 0 {
			t.Fatalf("Poll after drain = %d", n)
		}
		c.Ack(0)
	}); a != 0 {
		t.Errorf("Poll allocates %.1f times per batch", a)
	}
}

// BenchmarkPoll16 has the simulated kernel produce 16 completions and
// polls them in one call; ns/op is per batch.
func BenchmarkPoll16(b *testing.B) {
	c := newSimCQ(b, 64)
	batch := make([]rxe.WC, 16)
	for i := range batch {
		batch[i] = rxe.WC{WRID: uint64(i), Opcode: rxe.WCRecv, ByteLen: 100, QPNum: 17, Flags: rxe.WCWithImm, Imm: 5}
	}
	wc := make([]WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		for i := range batch {
			c.kernel.Complete(&batch[i])
		}
		if n, _ := c.Poll(wc); n != 16 {
			b.Fatal(n)
		}
	}
}

func newTestChannel(t *testing.T) (*Channel, *pipeSource) {
	t.Helper()
	src := newPipeSource(t)
	ch, err := newChannel(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, ch)
	return ch, src
}

// closeAtEnd closes ch when the test ends, detaching the CQs the test
// left on it.
func closeAtEnd(t testing.TB, ch *Channel) {
	t.Cleanup(func() {
		ch.mu.Lock()
		clear(ch.cqs)
		ch.changed()
		ch.mu.Unlock()
		if err := ch.Close(); err != nil {
			t.Error(err)
		}
	})
}

// attach registers c on ch the way New does.
func attach(t *testing.T, ch *Channel, c *CQ) {
	t.Helper()
	h, err := ch.reserve()
	if err != nil {
		t.Fatal(err)
	}
	c.ch, c.handle = ch, h
	ch.add(h, c)
}

func TestTryGetEvent(t *testing.T) {
	ch, src := newTestChannel(t)
	a, b := newSimCQ(t, 4), newSimCQ(t, 4)
	attach(t, ch, a.CQ)
	attach(t, ch, b.CQ)

	if _, err := ch.TryGetEvent(); !errors.Is(err, ErrNoEvent) || !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("TryGetEvent on an empty channel = %v, want ErrNoEvent and EAGAIN", err)
	}
	if n := testing.AllocsPerRun(100, func() { ch.TryGetEvent() }); n != 0 {
		t.Errorf("TryGetEvent on an empty channel allocates %.1f times", n)
	}
	src.event(t, b.handle)
	src.event(t, a.handle)
	if got, err := ch.TryGetEvent(); got != b.CQ || err != nil {
		t.Errorf("first event: %p, %v; want CQ b %p", got, err, b.CQ)
	}
	if got, err := ch.TryGetEvent(); got != a.CQ || err != nil {
		t.Errorf("second event: %p, %v; want CQ a %p", got, err, a.CQ)
	}
	if a.Unacked() != 1 || b.Unacked() != 1 {
		t.Errorf("unacked a=%d b=%d, want 1 each", a.Unacked(), b.Unacked())
	}
	src.event(t, 999)
	if _, err := ch.TryGetEvent(); err == nil || !strings.Contains(err.Error(), "unknown CQ handle 999") {
		t.Errorf("event for an unknown handle = %v", err)
	}
}

// TestTryGetEventManyCQs: events find their CQ whether the channel
// lists its CQs (up to fewCQs) or looks them up in its map (more), and
// as the count crosses between the two.
func TestTryGetEventManyCQs(t *testing.T) {
	ch, src := newTestChannel(t)
	var cqs []simCQ
	check := func(when string, listed bool) {
		t.Helper()
		if got := ch.few.Load() != nil; got != listed {
			t.Fatalf("%s: %d CQs listed %v, want %v", when, len(cqs), got, listed)
		}
		for _, c := range cqs {
			src.event(t, c.handle)
			if got, err := ch.TryGetEvent(); got != c.CQ || err != nil {
				t.Fatalf("%s: event of CQ %d = %p, %v; want %p", when, c.handle, got, err, c.CQ)
			}
			c.Ack(1)
		}
	}
	for range fewCQs {
		c := newSimCQ(t, 4)
		attach(t, ch, c.CQ)
		cqs = append(cqs, c)
	}
	check("at the limit", true)
	for range 4 {
		c := newSimCQ(t, 4)
		attach(t, ch, c.CQ)
		cqs = append(cqs, c)
	}
	check("beyond it", false)
	for _, c := range cqs[:4] {
		ch.remove(c.handle)
	}
	gone := cqs[0]
	cqs = cqs[4:]
	check("back at it", true)
	src.event(t, gone.handle)
	if got, err := ch.TryGetEvent(); err == nil || !strings.Contains(err.Error(), "unknown CQ handle") {
		t.Fatalf("event of a removed CQ = %p, %v; want the unknown handle", got, err)
	}
}

func TestGetEventBlocks(t *testing.T) {
	ch, src := newTestChannel(t)
	c := newSimCQ(t, 4)
	attach(t, ch, c.CQ)
	go func() {
		time.Sleep(20 * time.Millisecond)
		src.event(t, c.handle)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := ch.GetEvent(ctx)
	if got != c.CQ || err != nil {
		t.Fatalf("GetEvent = %p, %v; want the CQ", got, err)
	}
	// Without a Done channel no eventfd is needed; the event is already there.
	src.event(t, c.handle)
	if got, err := ch.GetEvent(context.Background()); got != c.CQ || err != nil {
		t.Errorf("GetEvent(Background) = %p, %v", got, err)
	}
}

// TestChannelRegistersOnFirstWait: the channel fd joins an epoll set of
// the channel's own only once a GetEvent without a cancellable context
// waits (an fd in a set costs every event epoll's wake-up), and then one.
func TestChannelRegistersOnFirstWait(t *testing.T) {
	ch, src := newTestChannel(t)
	c := newSimCQ(t, 4)
	attach(t, ch, c.CQ)
	later := func() {
		go func() {
			time.Sleep(20 * time.Millisecond)
			src.event(t, c.handle)
		}()
	}
	want := func(when string, n int) {
		t.Helper()
		if got := epollSetsHolding(t, src.FD()); got != n {
			t.Fatalf("%s: the channel fd is in %d epoll sets, want %d", when, got, n)
		}
	}
	want("made", 0)
	src.event(t, c.handle)
	if got, err := ch.TryGetEvent(); got != c.CQ || err != nil {
		t.Fatalf("TryGetEvent = %p, %v", got, err)
	}
	want("after TryGetEvent", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	later()
	if got, err := ch.GetEvent(ctx); got != c.CQ || err != nil {
		t.Fatalf("GetEvent(ctx) = %p, %v", got, err)
	}
	want("after a wait with a cancellable context (a ppoll)", 0)
	for range 2 {
		later()
		if got, err := ch.GetEvent(context.Background()); got != c.CQ || err != nil {
			t.Fatalf("GetEvent(Background) = %p, %v", got, err)
		}
		want("after waits without one", 1)
	}
}

// epollSetsHolding counts this process's epoll sets that hold fd.
func epollSetsHolding(t *testing.T, fd int) int {
	t.Helper()
	n := 0
	for _, set := range anonFDs(t, "eventpoll") {
		info, err := os.ReadFile("/proc/self/fdinfo/" + set)
		if err != nil {
			continue // closed meanwhile
		}
		for _, line := range strings.Split(string(info), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "tfd:" && f[1] == strconv.Itoa(fd) {
				n++
			}
		}
	}
	return n
}

func TestGetEventCancel(t *testing.T) {
	ch, _ := newTestChannel(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := ch.GetEvent(ctx)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("GetEvent after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GetEvent not unblocked by cancel")
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := ch.GetEvent(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetEvent past its deadline = %v", err)
	}
	if d := time.Since(start); d < 25*time.Millisecond || d > 5*time.Second {
		t.Errorf("GetEvent returned after %v for a 30ms deadline", d)
	}
}

func TestChannelClose(t *testing.T) {
	ch, _ := newTestChannel(t)
	c := newSimCQ(t, 4)
	attach(t, ch, c.CQ)
	if err := ch.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Close with a CQ attached = %v, want EBUSY", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := ch.GetEvent(context.Background())
			errc <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("GetEvent on a closed channel = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not unblock GetEvent")
		}
	}
	if err := ch.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := ch.TryGetEvent(); !errors.Is(err, ErrClosed) {
		t.Errorf("TryGetEvent after Close = %v", err)
	}
	if _, err := ch.reserve(); !errors.Is(err, ErrClosed) {
		t.Errorf("creating a CQ on a closed channel = %v", err)
	}
}

func TestCloseUnacked(t *testing.T) {
	ch, src := newTestChannel(t)
	c := newSimCQ(t, 4)
	attach(t, ch, c.CQ)
	src.event(t, c.handle)
	src.event(t, c.handle)
	for range 2 {
		if _, err := ch.TryGetEvent(); err != nil {
			t.Fatal(err)
		}
	}
	c.Ack(1)
	err := c.Close()
	if !errors.Is(err, ErrUnackedEvents) || !strings.Contains(err.Error(), "1 events") {
		t.Fatalf("Close with an unacked event = %v", err)
	}
	if n, err := c.Poll(make([]WC, 1)); n != 0 || err != nil {
		t.Errorf("refused Close left the CQ unusable: %d, %v", n, err)
	}
	c.Ack(1)
	if err := c.Close(); err != nil {
		t.Fatalf("Close after Ack: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Poll(make([]WC, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Poll after Close = %v", err)
	}
	if err := c.ReqNotify(false); !errors.Is(err, ErrClosed) {
		t.Errorf("ReqNotify after Close = %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("channel Close after its CQ closed: %v", err)
	}
}

// countingSource counts the reads GetEvent makes.
type countingSource struct {
	*pipeSource
	reads atomic.Int64
}

func (c *countingSource) ReadEvent() (uint64, error) {
	c.reads.Add(1)
	return c.pipeSource.ReadEvent()
}

func newCountingChannel(t *testing.T) (*Channel, *countingSource, simCQ) {
	t.Helper()
	src := &countingSource{pipeSource: newPipeSource(t)}
	ch, err := newChannel(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, ch)
	c := newSimCQ(t, 4)
	attach(t, ch, c.CQ)
	return ch, src, c
}

// An event already queued costs one read, like ibv_get_cq_event; a wait
// costs the poll and one read, plus the probing reads, which grow rarer.
func TestGetEventReads(t *testing.T) {
	ch, src, c := newCountingChannel(t)
	const n = 256
	for range n {
		src.event(t, c.handle)
	}
	for range n {
		if got, err := ch.GetEvent(context.Background()); got != c.CQ || err != nil {
			t.Fatalf("GetEvent = %p, %v", got, err)
		}
	}
	if r := src.reads.Load(); r != n {
		t.Errorf("%d queued events took %d reads, want %d", n, r, n)
	}

	// Waits: the event arrives only after GetEvent has begun.
	src.reads.Store(0)
	ready := make(chan struct{})
	go func() {
		for range ready {
			time.Sleep(time.Millisecond)
			src.event(t, c.handle)
		}
	}()
	defer close(ready)
	for range n {
		ready <- struct{}{}
		if got, err := ch.GetEvent(context.Background()); got != c.CQ || err != nil {
			t.Fatalf("GetEvent = %p, %v", got, err)
		}
	}
	// The first wait reads first (EAGAIN); then the 8th, 16th and 32nd
	// do, and every 64th (probes). One more read allows for a wait whose
	// event came early.
	if r, max := src.reads.Load(), int64(n+1+3+n/probeMax+1); r > max {
		t.Errorf("%d waits took %d reads, want at most %d", n, r, max)
	}
}

// A TryGetEvent that finds nothing is a look GetEvent need not repeat: a
// GetEvent right after it polls first, even where events had been found
// queued (the tools look for a send's completion, then wait).
func TestGetEventAfterTryGetEventMiss(t *testing.T) {
	ch, src, c := newCountingChannel(t)
	src.event(t, c.handle)
	if got, err := ch.GetEvent(context.Background()); got != c.CQ || err != nil {
		t.Fatalf("GetEvent = %p, %v", got, err)
	}
	src.reads.Store(0)
	if got, err := ch.TryGetEvent(); err != ErrNoEvent {
		t.Fatalf("TryGetEvent on an empty channel = %p, %v", got, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Millisecond)
		src.event(t, c.handle)
	}()
	if got, err := ch.GetEvent(context.Background()); got != c.CQ || err != nil {
		t.Fatalf("GetEvent = %p, %v", got, err)
	}
	<-done
	// The look, and GetEvent's read after its poll: no read between.
	if r := src.reads.Load(); r != 2 {
		t.Errorf("a look that missed and a GetEvent took %d reads, want 2", r)
	}
}

// The hot path allocates nothing: an event already queued, and a wait that
// polls first, with a context that cannot be cancelled and with one that
// can (registered with it once, on the first wait).
func TestGetEventAllocs(t *testing.T) {
	ch, src, c := newCountingChannel(t)
	ev := make([]byte, 8) // written by the test, not the code under test
	binary.NativeEndian.PutUint64(ev, c.handle)
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ctx := range []context.Context{context.Background(), cancellable} {
		for _, idle := range []uint32{0, 1} {
			if a := testing.AllocsPerRun(200, func() {
				unix.Write(src.w, ev)
				ch.idle.Store(idle)
				if got, err := ch.GetEvent(ctx); got != c.CQ || err != nil {
					t.Fatalf("GetEvent = %p, %v", got, err)
				}
				c.Ack(1)
			}); a != 0 {
				t.Errorf("GetEvent (idle %d, cancellable %v) allocates %.1f times per event", idle, ctx.Done() != nil, a)
			}
		}
	}
}

// A context stays registered from one GetEvent to the next: cancelling it
// still wakes a later wait at once, and a wait with another context is not
// woken by the first one's cancellation.
func TestGetEventKeepsContextRegistered(t *testing.T) {
	ch, src := newTestChannel(t)
	c := newSimCQ(t, 4)
	attach(t, ch, c.CQ)
	waitErr := func(ctx context.Context) <-chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := ch.GetEvent(ctx)
			errc <- err
		}()
		return errc
	}
	a, cancelA := context.WithCancel(context.Background())
	for range 3 {
		src.event(t, c.handle)
		if got, err := ch.GetEvent(a); got != c.CQ || err != nil {
			t.Fatalf("GetEvent(a) = %p, %v", got, err)
		}
		c.Ack(1)
	}
	errc := waitErr(a)
	time.Sleep(20 * time.Millisecond)
	cancelA()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("GetEvent(a) after cancel = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling a context registered by earlier waits did not wake the wait")
	}

	b, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	d, cancelD := context.WithCancel(context.Background())
	src.event(t, c.handle)
	if _, err := ch.GetEvent(d); err != nil { // d is now the registered one
		t.Fatal(err)
	}
	c.Ack(1)
	errc = waitErr(b)
	time.Sleep(20 * time.Millisecond)
	cancelD() // d's waker fires; b's wait must not notice
	select {
	case err := <-errc:
		t.Fatalf("GetEvent(b) returned %v when another context was cancelled", err)
	case <-time.After(50 * time.Millisecond):
	}
	src.event(t, c.handle)
	if err := <-errc; err != nil {
		t.Fatalf("GetEvent(b) = %v, want the event", err)
	}
	c.Ack(1)
}

// isOpen reports whether fd is an open descriptor of this process.
func isOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// eventfds counts the process's open eventfds.
func eventfds(t *testing.T) int {
	t.Helper()
	return len(anonFDs(t, "eventfd"))
}

// anonFDs are the process's open fds (their numbers, as /proc names them)
// of one anonymous inode kind: eventfd, eventpoll.
func anonFDs(t *testing.T, kind string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:["+kind+"]" {
			fds = append(fds, e.Name())
		}
	}
	return fds
}

// A channel left registered with a context that is never done holds no fd
// after Close, and none once dropped without Close and collected: neither
// its poller's eventfd nor the one registered with the context.
func TestChannelArmedWakerReleased(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // only at the end: the registration outlives the channel
	base := eventfds(t)
	// open makes a channel whose last wait left its waker registered with
	// ctx.
	open := func() (*Channel, *simCQ) {
		src := newPipeSource(t)
		ch, err := newChannel(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := newSimCQ(t, 4)
		attach(t, ch, c.CQ)
		src.event(t, c.handle)
		ch.idle.Store(1) // the wait path: register, poll, read
		if _, err := ch.GetEvent(ctx); err != nil {
			t.Fatal(err)
		}
		c.Ack(1)
		if n := eventfds(t) - base; n != 2 {
			t.Fatalf("%d eventfds after a wait with a cancellable context, want 2 (the poller's, the waker left registered)", n)
		}
		return ch, &c
	}
	ch, c := open()
	ch.remove(c.handle)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if n := eventfds(t) - base; n != 0 {
		t.Fatalf("%d eventfds still open after Close", n)
	}

	func() { open() }()
	for i := 0; eventfds(t) != base; i++ {
		if i == 100 {
			t.Fatalf("%d eventfds of a dropped channel still open", eventfds(t)-base)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	// The leak check saw the channel, which it must report.
	l := leakcheck.Collect(time.Second)
	if !slices.ContainsFunc(l, func(l leakcheck.Leak) bool { return l.What == "cq.Channel" }) {
		t.Errorf("leaks reported for the dropped channel: %v", l)
	}
}

// Close wakes every blocked GetEvent, whatever its context, and returns
// only once they have all left the channel: the fd is never closed under
// a poll.
func TestCloseWakesEveryWaiter(t *testing.T) {
	ch, _ := newTestChannel(t)
	const n = 8
	var returned atomic.Int32
	errc := make(chan error, n)
	for i := range n {
		ctx := context.Background()
		if i%2 == 1 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
		}
		go func() {
			_, err := ch.GetEvent(ctx)
			returned.Add(1)
			errc <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if r := returned.Load(); r != 0 {
		t.Fatalf("%d GetEvent calls returned before Close", r)
	}
	closed := make(chan error, 1)
	go func() { closed <- ch.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		// Close waits for the waiters to leave; they never woke.
		t.Fatalf("Close still waiting after 5s; %d of %d GetEvent calls returned", returned.Load(), n)
	}
	for range n {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("GetEvent on a closed channel = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Close woke %d of %d GetEvent calls", returned.Load(), n)
		}
	}
	if isOpen(ch.src.FD()) {
		t.Error("Close left the channel fd open")
	}
}

// Cancelling one waiter wakes only that one; the cancellation eventfd is
// drained before it is reused, so a later wait with a new context blocks
// until its own deadline, and cancellations racing events never leave a
// stale wake-up behind.
func TestCancelReusesWaker(t *testing.T) {
	ch, src := newTestChannel(t)
	c := newSimCQ(t, 4)
	attach(t, ch, c.CQ)

	other := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := ch.GetEvent(ctx)
		if err == nil && got != c.CQ {
			err = errors.New("wrong CQ")
		}
		other <- err
	}()
	for i := range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		if i%2 == 0 {
			go cancel()
		} else {
			cancel()
		}
		if _, err := ch.GetEvent(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: GetEvent after cancel = %v", i, err)
		}
		cancel()
	}
	select {
	case err := <-other:
		t.Fatalf("another waiter's cancellations woke this one: %v", err)
	default:
	}
	src.event(t, c.handle)
	if err := <-other; err != nil {
		t.Fatalf("the other waiter: %v", err)
	}
	c.Ack(1)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := ch.GetEvent(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetEvent after 200 cancellations = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Errorf("GetEvent returned after %v, before its 30ms deadline: a stale wake-up", d)
	}
}

// The cost of a wait with a cancellable context (AfterFunc registration
// and the poll) against one that cannot be cancelled.
func BenchmarkGetEventWait(b *testing.B) {
	for _, name := range []string{"Background", "WithCancel"} {
		b.Run(name, func(b *testing.B) {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
				b.Fatal(err)
			}
			defer unix.Close(p[1])
			src := &pipeSource{r: p[0], w: p[1]}
			ch, err := newChannel(src, nil)
			if err != nil {
				b.Fatal(err)
			}
			closeAtEnd(b, ch)
			h, _ := ch.reserve()
			c := &CQ{ch: ch, handle: h}
			ch.add(h, c)
			ctx := context.Background()
			if name == "WithCancel" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			var ev [8]byte
			binary.NativeEndian.PutUint64(ev[:], h)
			b.ReportAllocs()
			for b.Loop() {
				unix.Write(p[1], ev[:])
				ch.idle.Store(1) // the wait path: poll, then read
				if _, err := ch.GetEvent(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A channel holds its CQs weakly: a CQ the program dropped without Close
// is collected while its channel lives on, an event the kernel still
// queues for it is discarded, and the channel's Close is not refused for
// it. A CQ that is still reachable keeps its refusal.
func TestDroppedCQOfLiveChannelIsCollected(t *testing.T) {
	ch, src := newTestChannel(t)
	live := newSimCQ(t, 4)
	attach(t, ch, live.CQ)
	collected := make(chan struct{})
	var h uint64
	func() {
		c := newSimCQ(t, 4)
		attach(t, ch, c.CQ)
		h = c.handle
		runtime.AddCleanup(c.CQ, func(done chan struct{}) { close(done) }, collected)
	}()
	for i := 0; ; i++ {
		runtime.GC()
		select {
		case <-collected:
		case <-time.After(10 * time.Millisecond):
			if i == 100 {
				t.Fatal("a dropped CQ is never collected while its channel lives")
			}
			continue
		}
		break
	}
	src.event(t, h)
	if c, err := ch.TryGetEvent(); !errors.Is(err, ErrNoEvent) {
		t.Fatalf("TryGetEvent with only an event of a collected CQ queued = %v, %v; want ErrNoEvent", c, err)
	}
	src.event(t, h)
	src.event(t, live.handle)
	if c, err := ch.TryGetEvent(); err != nil || c != live.CQ {
		t.Fatalf("TryGetEvent behind an event of a collected CQ = %p, %v; want the live CQ %p", c, err, live.CQ)
	}
	live.Ack(1)
	if err := ch.Close(); !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "1 CQs") {
		t.Fatalf("Close with one live and one collected CQ = %v, want EBUSY naming 1 CQ", err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("Close with only a collected CQ left = %v", err)
	}
}
