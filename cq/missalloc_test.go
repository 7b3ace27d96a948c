package cq

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// emptySource is a channel with no event queued, failing as
// uverbs.CompChannel.ReadEvent does.
type emptySource struct{ fd int }

var errEmpty error = &uverbs.Error{Verb: "read_comp_event", Errno: unix.EAGAIN}

func (s emptySource) FD() int                    { return s.fd }
func (s emptySource) ReadEvent() (uint64, error) { return 0, errEmpty }
func (s emptySource) Close() error               { return nil }

// TryGetEvent on an empty channel, and its caller's errors.Is(err,
// ErrNoEvent), allocate nothing, from a process's first call on. The
// interface assertions inside errors.Is would: they build their caches, a
// heap allocation, at a random one in about 1 000 calls with an error type
// they have no entry for yet, which the many calls here would meet. The
// test runs itself again, in a process where no error of uverbs' type has
// been through errors.Is (another test could have built the entry).
func TestTryGetMissAllocatesNothing(t *testing.T) {
	if os.Getenv("CQ_MISS_ALLOCS") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTryGetMissAllocatesNothing$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "CQ_MISS_ALLOCS=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	ch, err := newChannel(emptySource{fd: p[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	defer unix.Close(p[0])
	const calls = 20000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		if c, err := ch.TryGetEvent(); c != nil || !errors.Is(err, ErrNoEvent) {
			t.Fatalf("TryGetEvent on an empty channel: %v, %v", c, err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n != 0 {
		t.Errorf("%d misses allocated %d times", calls, n)
	}
}
