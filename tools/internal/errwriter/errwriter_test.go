package errwriter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
)

// limited accepts n bytes, then fails every write with ENOSPC.
type limited struct {
	bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.Len()+len(p) > l.n {
		k := l.n - l.Len()
		l.Buffer.Write(p[:k])
		return k, syscall.ENOSPC
	}
	return l.Buffer.Write(p)
}

// The first failure is kept and every later write refused, so a report
// never continues past a hole; a short write without an error counts.
func TestFirstErrorKept(t *testing.T) {
	l := &limited{n: 10}
	w := New(l)
	fmt.Fprint(w, "12345")
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	fmt.Fprint(w, "6789012")
	fmt.Fprint(w, "3")
	if !errors.Is(w.Err(), syscall.ENOSPC) || l.String() != "1234567890" {
		t.Fatalf("err %v, wrote %q", w.Err(), l.String())
	}
	if n, err := w.Write([]byte("x")); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write after the failure: %d, %v", n, err)
	}
	short := New(writerFunc(func(p []byte) (int, error) { return len(p) - 1, nil }))
	short.Write([]byte("ab"))
	if !errors.Is(short.Err(), io.ErrShortWrite) {
		t.Fatalf("short write: %v", short.Err())
	}
}

// On /dev/full, the disk-full case the issue reproduced, the first write
// fails with ENOSPC.
func TestDevFull(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	w := New(f)
	fmt.Fprintln(w, "a line")
	if !errors.Is(w.Err(), syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC", w.Err())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
