package fdwait

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// TestMain fails the package's tests when any of them left a resource to
// the garbage collector.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// modes runs f under each Mode, as a subtest named after it.
func modes(t *testing.T, f func(t *testing.T, m Mode)) {
	for _, m := range []Mode{Ppoll, Netpoll} {
		name := "Ppoll"
		if m == Netpoll {
			name = "Netpoll"
		}
		t.Run(name, func(t *testing.T) { f(t, m) })
	}
}

func newPoller(t *testing.T, m Mode) *Poller {
	t.Helper()
	p, err := New(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// waitErr runs Wait in a goroutine and returns its result channel.
func waitErr(p *Poller, ctx context.Context, deadline time.Time, fds ...int) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- p.Wait(ctx, deadline, fds...) }()
	return ch
}

func expect(t *testing.T, ch <-chan error, want func(error) bool, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if !want(err) {
			t.Fatalf("Wait = %v, want %s", err, what)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Wait still blocked, want %s", what)
	}
}

func blocked(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Wait returned %v, want it blocked", err)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestReadable(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p := newPoller(t, m)
		r1, _ := pipe(t)
		r2, w2 := pipe(t)
		ch := waitErr(p, context.Background(), time.Time{}, r1, r2)
		blocked(t, ch)
		unix.Write(w2, []byte{1})
		expect(t, ch, func(err error) bool { return err == nil }, "nil (readable)")
	})
}

func TestWake(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p := newPoller(t, m)
		r, _ := pipe(t)
		checkWakes(t, p, r)
		// ClearWake takes wakes back.
		p.Wake()
		p.ClearWake()
		if err := p.Wait(context.Background(), time.Now(), r); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Wait after ClearWake = %v, want the deadline", err)
		}
	})
}

func TestContextCancel(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p := newPoller(t, m)
		r, _ := pipe(t)
		ctx, cancel := context.WithCancel(context.Background())
		ch := waitErr(p, ctx, time.Time{}, r)
		blocked(t, ch)
		cancel()
		expect(t, ch, func(err error) bool { return err == context.Canceled }, "context.Canceled")
		if err := p.Wait(ctx, time.Time{}, r); err != context.Canceled {
			t.Fatalf("Wait with a done ctx = %v", err)
		}
		// A fresh context after a cancelled one waits again.
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		if err := p.Wait(ctx2, time.Now().Add(20*time.Millisecond), r); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Wait with a new context = %v, want the deadline", err)
		}
	})
}

func TestDeadline(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p := newPoller(t, m)
		r, w := pipe(t)
		start := time.Now()
		err := p.Wait(context.Background(), start.Add(30*time.Millisecond), r)
		if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < 30*time.Millisecond {
			t.Fatalf("Wait = %v after %v, want the deadline after 30ms", err, time.Since(start))
		}
		// A past deadline still sees a readable fd.
		unix.Write(w, []byte{1})
		if err := p.Wait(context.Background(), start, r); err != nil {
			t.Fatalf("Wait with a past deadline on a readable fd = %v", err)
		}
	})
}

// TestDeadlineWithoutMonotonic: a deadline with no monotonic clock
// reading (time.Unix's, or Round(0)'s) is kept by the wall clock, with
// the one clock reading a wait makes for the others.
func TestDeadlineWithoutMonotonic(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 0, 30 * time.Millisecond, time.Hour} {
		now := sinceEpoch()
		mono := time.Now().Add(d)
		if got, want := timeLeft(mono.Round(0), now), timeLeft(mono, now); got-want > 5*time.Millisecond || want-got > 5*time.Millisecond {
			t.Errorf("timeLeft %v ahead: %v by the wall clock, %v by the monotonic one", d, got, want)
		}
	}
	waitCalls(t, func(t *testing.T) {
		r, _ := pipe(t)
		for name, p := range map[string]*Poller{"Ppoll": newPoller(t, Ppoll), "registered": newRegistered(t, r)} {
			start := time.Now()
			err := p.Wait(context.Background(), start.Add(30*time.Millisecond).Round(0), r)
			if took := time.Since(start); !errors.Is(err, os.ErrDeadlineExceeded) || took < 25*time.Millisecond {
				t.Fatalf("%s: Wait = %v after %v, want the deadline after 30ms", name, err, took)
			}
			blocked(t, waitErr(p, context.Background(), time.Now().Add(time.Hour).Round(0), r))
			p.Wake()
		}
	})
}

func TestCloseWakesEveryWaiter(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p, err := New(m)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := pipe(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var chs []<-chan error
		for i := range 4 {
			c := context.Background()
			if i%2 == 1 {
				c = ctx
			}
			chs = append(chs, waitErr(p, c, time.Time{}, r))
		}
		blocked(t, chs[0])
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		for _, ch := range chs {
			expect(t, ch, func(err error) bool { return errors.Is(err, ErrClosed) }, "ErrClosed")
		}
		if err := p.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if err := p.Wait(context.Background(), time.Time{}, r); !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait after Close = %v", err)
		}
		if err := p.Wake(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Wake after Close = %v", err)
		}
		p.ClearWake() // does nothing
	})
}

func TestConcurrentContexts(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p := newPoller(t, m)
		r, _ := pipe(t)
		ctxA, cancelA := context.WithCancel(context.Background())
		ctxB, cancelB := context.WithCancel(context.Background())
		defer cancelB()
		a := waitErr(p, ctxA, time.Time{}, r)
		b := waitErr(p, ctxB, time.Time{}, r)
		blocked(t, a)
		cancelA()
		expect(t, a, func(err error) bool { return err == context.Canceled }, "A cancelled")
		blocked(t, b)
		cancelB()
		expect(t, b, func(err error) bool { return err == context.Canceled }, "B cancelled")
	})
}

func TestTooManyFDs(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p := newPoller(t, m)
		if err := p.Wait(context.Background(), time.Time{}, 0, 1, 2); !errors.Is(err, unix.EINVAL) {
			t.Fatalf("Wait on 3 fds = %v", err)
		}
	})
}

// A loop waiting with one cancellable context allocates nothing.
func TestWaitAllocs(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p := newPoller(t, m)
		r, w := pipe(t)
		unix.Write(w, []byte{1}) // stays readable
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		deadline := time.Now().Add(time.Hour)
		p.Wait(ctx, deadline, r)
		if n := testing.AllocsPerRun(100, func() {
			if err := p.Wait(ctx, deadline, r); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("Wait allocates %v times per call", n)
		}
	})
}

func TestWakeRace(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p, err := New(m)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					p.Wake()
				}
			}()
		}
		p.Close()
		wg.Wait()
	})
}

// Under Netpoll a Wait that waits for its turn still ends by its context,
// its deadline and Close; the turn then passes on when readable.
func TestNetpollTurns(t *testing.T) {
	p, err := New(Netpoll)
	if err != nil {
		t.Fatal(err)
	}
	r, w := pipe(t)
	first := waitErr(p, context.Background(), time.Time{}, r)
	blocked(t, first) // owns the set
	ctx, cancel := context.WithCancel(context.Background())
	second := waitErr(p, ctx, time.Time{}, r)
	blocked(t, second)
	cancel()
	expect(t, second, func(err error) bool { return err == context.Canceled }, "context.Canceled while waiting for the turn")
	start := time.Now()
	if err := p.Wait(context.Background(), start.Add(30*time.Millisecond), r); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("Wait for the turn = %v after %v, want the deadline after 30ms", err, time.Since(start))
	}
	third := waitErr(p, context.Background(), time.Time{}, r)
	blocked(t, third)
	unix.Write(w, []byte{1})
	expect(t, first, func(err error) bool { return err == nil }, "nil (readable)")
	expect(t, third, func(err error) bool { return err == nil }, "nil (readable, level-triggered)")
	var b [1]byte
	unix.Read(r, b[:])
	fourth := waitErr(p, context.Background(), time.Time{}, r)
	fifth := waitErr(p, context.Background(), time.Time{}, r)
	blocked(t, fourth)
	p.Close()
	expect(t, fourth, func(err error) bool { return errors.Is(err, ErrClosed) }, "ErrClosed")
	expect(t, fifth, func(err error) bool { return errors.Is(err, ErrClosed) }, "ErrClosed")
}

// Under Netpoll the epoll set follows the fds a Wait names: a dropped fd
// no longer wakes, a new one does.
func TestNetpollChangeFDs(t *testing.T) {
	p := newPoller(t, Netpoll)
	r1, w1 := pipe(t)
	r2, w2 := pipe(t)
	if err := p.Wait(context.Background(), time.Now(), r1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Wait on r1 = %v", err)
	}
	unix.Write(w1, []byte{1})
	if err := p.Wait(context.Background(), time.Now().Add(20*time.Millisecond), r2); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Wait on r2 with r1 readable = %v, want the deadline", err)
	}
	unix.Write(w2, []byte{1})
	if err := p.Wait(context.Background(), time.Time{}, r2, -1); err != nil {
		t.Fatalf("Wait on r2 readable = %v", err)
	}
	if err := p.Wait(context.Background(), time.Time{}, 1<<20); !errors.Is(err, unix.EBADF) {
		t.Fatalf("Wait on a bad fd = %v, want EBADF", err)
	}
}

// A parked Wait holds no OS thread: 200 of them on 200 Netpoll Pollers
// leave the process with far fewer threads than waiters.
func TestNetpollThreads(t *testing.T) {
	const waiters = 200
	before := threads(t)
	r, w := pipe(t)
	var chs []<-chan error
	for range waiters {
		chs = append(chs, waitErr(newPoller(t, Netpoll), context.Background(), time.Time{}, r))
	}
	time.Sleep(200 * time.Millisecond) // they all park
	for _, ch := range chs[:5] {
		blocked(t, ch)
	}
	during := threads(t)
	t.Logf("threads: %d before, %d with %d waiters", before, during, waiters)
	if during-before > waiters/10 {
		t.Errorf("%d waiters took %d threads more", waiters, during-before)
	}
	unix.Write(w, []byte{1})
	for _, ch := range chs {
		expect(t, ch, func(err error) bool { return err == nil }, "nil (readable)")
	}
}

// threads is the process's thread count (/proc/self/status).
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// waitCalls runs f once with each system call a registered wait can make:
// epoll_pwait2, and epoll_pwait as on a kernel without it (noPwait2), as
// subtests named after them.
func waitCalls(t *testing.T, f func(t *testing.T)) {
	for _, fallback := range []bool{false, true} {
		name := "epoll_pwait2"
		if fallback {
			name = "epoll_pwait"
		}
		t.Run(name, func(t *testing.T) {
			was := noPwait2.Swap(fallback)
			defer noPwait2.Store(was)
			f(t)
		})
	}
}

func newRegistered(t *testing.T, fds ...int) *Poller {
	t.Helper()
	p, err := NewRegistered(fds...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A registered wait watches the files in its epoll set: after the fd's
// number is made another pipe's (dup2), only the registered path still
// sees the first pipe, and only the poll path sees the second. So the
// test tells which path a Wait takes.
func TestRegisteredPath(t *testing.T) {
	waitCalls(t, func(t *testing.T) {
		r1, w1 := pipe(t)
		other, _ := pipe(t)
		p := newRegistered(t, r1, -1)
		keep, err := unix.Dup(r1) // keeps the registered file open
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(keep)
		r2, w2 := pipe(t)
		if err := unix.Dup3(r2, r1, unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		// The registered file is readable; fd r1, polled, would not be.
		unix.Write(w1, []byte{1})
		soon := time.Now().Add(5 * time.Second)
		if err := p.Wait(context.Background(), soon, r1); err != nil {
			t.Fatalf("registered Wait = %v, want nil (the registered file is readable)", err)
		}
		if err := p.Wait(context.Background(), soon, -1, r1); err != nil {
			t.Fatalf("registered Wait (other order) = %v, want nil", err)
		}
		// A cancellable context, or other fds, poll fd r1 (now pipe 2).
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := p.Wait(ctx, time.Now().Add(10*time.Millisecond), r1); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Wait with a cancellable ctx = %v, want the deadline (polled)", err)
		}
		if err := p.Wait(context.Background(), time.Now().Add(10*time.Millisecond), r1, other); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Wait on other fds = %v, want the deadline (polled)", err)
		}
		unix.Write(w2, []byte{1})
		if err := p.Wait(ctx, time.Now().Add(5*time.Second), r1); err != nil {
			t.Fatalf("polled Wait = %v, want nil", err)
		}
	})
}

func TestRegisteredReadable(t *testing.T) {
	waitCalls(t, func(t *testing.T) {
		r1, _ := pipe(t)
		r2, w2 := pipe(t)
		p := newRegistered(t, r1, r2)
		ch := waitErr(p, context.Background(), time.Time{}, r1, r2)
		blocked(t, ch)
		unix.Write(w2, []byte{1})
		expect(t, ch, func(err error) bool { return err == nil }, "nil (readable)")
	})
}

func TestRegisteredWake(t *testing.T) {
	waitCalls(t, func(t *testing.T) {
		r, _ := pipe(t)
		checkWakes(t, newRegistered(t, r), r)
	})
}

// checkWakes checks that Wake ends a Wait on r blocked in p with ErrWoken,
// and that two wakes before a wait count as one.
func checkWakes(t *testing.T, p *Poller, r int) {
	t.Helper()
	ch := waitErr(p, context.Background(), time.Time{}, r)
	blocked(t, ch)
	p.Wake()
	expect(t, ch, func(err error) bool { return err == ErrWoken }, "ErrWoken")
	p.Wake()
	p.Wake()
	if err := p.Wait(context.Background(), time.Time{}, r); err != ErrWoken {
		t.Fatalf("Wait after two Wakes = %v", err)
	}
	if err := p.Wait(context.Background(), time.Now(), r); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the second wake was not absorbed: %v", err)
	}
}

// Close wakes every registered wait, and closes the epoll set once they
// have left.
func TestRegisteredClose(t *testing.T) {
	waitCalls(t, func(t *testing.T) {
		r, _ := pipe(t)
		before := openFDs(t)
		p, err := New(Ppoll)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Register(r); err != nil {
			t.Fatal(err)
		}
		if err := p.Register(r); !errors.Is(err, unix.EINVAL) {
			t.Fatalf("second Register = %v, want EINVAL", err)
		}
		var chs []<-chan error
		for range 4 {
			chs = append(chs, waitErr(p, context.Background(), time.Time{}, r))
		}
		blocked(t, chs[0])
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		for _, ch := range chs {
			expect(t, ch, func(err error) bool { return errors.Is(err, ErrClosed) }, "ErrClosed")
		}
		if after := openFDs(t); after != before {
			t.Fatalf("%d fds open before New, %d after Close", before, after)
		}
		if err := p.Register(r); !errors.Is(err, ErrClosed) {
			t.Fatalf("Register after Close = %v, want ErrClosed", err)
		}
	})
}

// A dropped Poller's cleanup closes its registered epoll set too.
func TestRegisteredDroppedIsClosed(t *testing.T) {
	r, _ := pipe(t)
	epfd := func() int {
		p, err := New(Ppoll)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Register(r); err != nil {
			t.Fatal(err)
		}
		return p.reg.p.Load().epfd
	}()
	isEpoll := func() bool {
		l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(epfd))
		return err == nil && l == "anon_inode:[eventpoll]"
	}
	if !isEpoll() {
		t.Fatalf("fd %d is no epoll set", epfd)
	}
	if l := leakcheck.Collect(2 * time.Second); len(l) != 1 || !strings.HasPrefix(l[0].What, "fdwait.Poller ") {
		t.Errorf("the leak check saw %v, want the dropped Poller", l)
	}
	if isEpoll() {
		t.Fatal("a dropped Poller's epoll set was never closed")
	}
}

// A registered wait ends at its deadline, never before, and a deadline
// already past still looks at the fds.
func TestRegisteredDeadline(t *testing.T) {
	waitCalls(t, func(t *testing.T) {
		r, w := pipe(t)
		p := newRegistered(t, r)
		for _, d := range []time.Duration{0, 300 * time.Microsecond, 1500 * time.Microsecond, 20 * time.Millisecond} {
			start := time.Now()
			err := p.Wait(context.Background(), start.Add(d), r)
			if took := time.Since(start); !errors.Is(err, os.ErrDeadlineExceeded) || took < d {
				t.Fatalf("Wait = %v after %v, want the deadline after %v", err, took, d)
			}
		}
		unix.Write(w, []byte{1})
		if err := p.Wait(context.Background(), time.Now().Add(-time.Second), r); err != nil {
			t.Fatalf("Wait with a past deadline on a readable fd = %v", err)
		}
	})
}

// A pipe's write end whose read end is closed polls as failed (POLLERR):
// an *FDError, registered or not. A read end whose write end is closed is
// readable (POLLHUP: the read sees the end of the file), as a poll says.
func TestFDError(t *testing.T) {
	for _, how := range []string{"Ppoll", "Netpoll", "registered", "registered epoll_pwait"} {
		t.Run(how, func(t *testing.T) {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
				t.Fatal(err)
			}
			r, w := p[0], p[1]
			defer unix.Close(w)
			var q [2]int
			if err := unix.Pipe2(q[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
				t.Fatal(err)
			}
			hr := q[0]
			defer unix.Close(hr)
			mode := Ppoll
			if how == "Netpoll" {
				mode = Netpoll
			}
			poller := newPoller(t, mode)
			if strings.HasPrefix(how, "registered") {
				was := noPwait2.Swap(how == "registered epoll_pwait")
				defer noPwait2.Store(was)
				if err := poller.Register(w); err != nil {
					t.Fatal(err)
				}
			}
			unix.Close(r)
			var fe *FDError
			if err := poller.Wait(context.Background(), time.Now().Add(5*time.Second), w); !errors.As(err, &fe) || fe.FD != w || fe.Revents&unix.POLLERR == 0 {
				t.Fatalf("Wait on a pipe's write end without a reader = %v, want an *FDError for fd %d with POLLERR", err, w)
			}
			unix.Close(q[1])
			if err := poller.Wait(context.Background(), time.Now().Add(5*time.Second), hr); err != nil {
				t.Fatalf("Wait on a pipe's read end without a writer = %v, want nil (readable: end of file)", err)
			}
		})
	}
}

// A registered wait allocates nothing, with and without a deadline.
func TestRegisteredWaitAllocs(t *testing.T) {
	waitCalls(t, func(t *testing.T) {
		r, w := pipe(t)
		unix.Write(w, []byte{1}) // stays readable
		p := newRegistered(t, r)
		deadline := time.Now().Add(time.Hour)
		if n := testing.AllocsPerRun(100, func() {
			if err := p.Wait(context.Background(), deadline, r); err != nil {
				t.Fatal(err)
			}
			if err := p.Wait(context.Background(), time.Time{}, r); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("a registered Wait allocates %v times per call", n)
		}
	})
}

func TestRegisterTooManyFDs(t *testing.T) {
	modes(t, func(t *testing.T, m Mode) {
		p := newPoller(t, m)
		if err := p.Register(0, 1, 2); !errors.Is(err, unix.EINVAL) {
			t.Fatalf("Register of 3 fds = %v", err)
		}
	})
}

// A NewRegistered that cannot register closes the Poller it made.
func TestNewRegisteredFailureLeavesNothing(t *testing.T) {
	before := openFDs(t)
	if _, err := NewRegistered(0, 1, 2); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("NewRegistered of 3 fds = %v", err)
	}
	if after := openFDs(t); after != before {
		t.Fatalf("open fds %d before, %d after a failed NewRegistered", before, after)
	}
}

// openFDs counts the process's open fds.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
