package uverbs

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// pipeEOF reports whether the read end of a pipe sees end-of-file, which
// happens only once every copy of the write end is closed.
func pipeEOF(t *testing.T, r int) bool {
	t.Helper()
	var b [1]byte
	n, err := unix.Read(r, b[:])
	if errors.Is(err, unix.EAGAIN) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return n == 0
}

func newPipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]) })
	return p[0], p[1]
}

func TestFileDescCloseOnce(t *testing.T) {
	r, w := newPipe(t)
	f := ownFD(w, "test pipe")
	if f.int() != w {
		t.Fatalf("int() = %d, want %d", f.int(), w)
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	if !pipeEOF(t, r) {
		t.Fatal("the write end is still open after close")
	}
	// A second close must not close the number again: by now it may name
	// another file of the process.
	r2, w2 := newPipe(t)
	defer unix.Close(w2)
	if err := f.close(); err != nil || f.int() != -1 {
		t.Fatalf("second close = %v, int() = %d", err, f.int())
	}
	if pipeEOF(t, r2) {
		t.Fatal("a second close closed a descriptor it no longer owns")
	}
	var none *fileDesc
	if none.int() != -1 || none.close() != nil {
		t.Fatal("a nil fileDesc is not an absent fd")
	}
}

func TestFileDescDroppedIsClosed(t *testing.T) {
	r, w := newPipe(t)
	ownFD(w, "test pipe") // dropped at once
	deadline := time.Now().Add(5 * time.Second)
	for !pipeEOF(t, r) {
		if time.Now().After(deadline) {
			t.Fatal("a dropped fileDesc's descriptor was never closed")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if l := leakcheck.Collect(time.Second); len(l) != 1 || !strings.HasPrefix(l[0].What, "test pipe ") {
		t.Errorf("the leak check saw %v, want the dropped pipe", l)
	}
}
