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
		ch := waitErr(p, context.Background(), time.Time{}, r)
		blocked(t, ch)
		p.Wake()
		expect(t, ch, func(err error) bool { return err == ErrWoken }, "ErrWoken")
		// Two wakes before a wait count as one; ClearWake takes them back.
		p.Wake()
		p.Wake()
		if err := p.Wait(context.Background(), time.Time{}, r); err != ErrWoken {
			t.Fatalf("Wait after two Wakes = %v", err)
		}
		if err := p.Wait(context.Background(), time.Now(), r); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the second wake was not absorbed: %v", err)
		}
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
