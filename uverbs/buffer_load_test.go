package uverbs

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// LoadByte sees every byte where Bytes put it, at every offset of a
// word, and allocates nothing.
func TestBufferLoadByte(t *testing.T) {
	b, err := NewBuffer(64, BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := b.Bytes()
	for i := range m {
		m[i] = byte(3*i + 1)
	}
	for i := range m {
		if got := b.LoadByte(i); got != byte(3*i+1) {
			t.Fatalf("LoadByte(%d) = %d, want %d", i, got, byte(3*i+1))
		}
	}
	if n := testing.AllocsPerRun(100, func() { b.LoadByte(13) }); n != 0 {
		t.Fatalf("LoadByte allocates %v times", n)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("LoadByte(64) of a 64-byte buffer did not panic")
		}
	}()
	b.LoadByte(64)
}

// LoadByte after Close returns 0, as Bytes returns nil and Addr 0, rather
// than loading from the unmapped memory (a fatal, unrecoverable fault);
// and a Close while another goroutine polls with LoadByte waits for the
// load in flight instead of unmapping under it.
func TestBufferLoadByteAfterClose(t *testing.T) {
	b, err := NewBuffer(4096, BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Bytes()[7] = 9
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.LoadByte(7); got != 0 {
		t.Fatalf("LoadByte(7) after Close = %d, want 0", got)
	}
	for range 200 {
		b, err := NewBuffer(4096, BufferOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.Bytes()[100] = 1
		polling := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			close(polling)
			for b.LoadByte(100) == 1 {
			}
		}()
		<-polling
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
	}
}

// Close gives the memory back at once (the range holds no pages) and the
// address range once the Buffer is unreachable, not before: a LoadByte
// racing with Close must find it mapped.
func TestBufferCloseReleasesMemoryThenRange(t *testing.T) {
	const size = 1 << 20
	b, err := NewBuffer(size, BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := b.Addr()
	for i := range b.Bytes() {
		b.Bytes()[i] = 1
	}
	if kb, ok := rangeRss(t, start); !ok || kb < size/1024 {
		t.Fatalf("before Close: the range holds %d kB (mapped %v), want %d", kb, ok, size/1024)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if kb, ok := rangeRss(t, start); !ok || kb != 0 {
		t.Fatalf("after Close: the range holds %d kB (mapped %v), want 0 kB and still mapped", kb, ok)
	}
	if got := b.LoadByte(size - 1); got != 0 {
		t.Fatalf("LoadByte after Close = %d", got)
	}
	runtime.KeepAlive(b)
	b = nil
	for range 20 {
		runtime.GC()
		if _, ok := rangeRss(t, start); !ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the closed Buffer's address range is still mapped after it became unreachable")
}

// rangeRss is the resident size in kB of the mapping starting at addr,
// from /proc/self/smaps, and whether there is one.
func rangeRss(t *testing.T, addr uint64) (kb int, ok bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	prefix := fmt.Sprintf("%x-", addr)
	in := false
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = strings.HasPrefix(line, prefix)
			ok = ok || in
			continue
		}
		if v, found := strings.CutPrefix(line, "Rss:"); found && in {
			kb, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return kb, ok
}

// BenchmarkBufferLoadByte is one poll of a byte the device writes, as a
// latency loop spins on it.
func BenchmarkBufferLoadByte(b *testing.B) {
	buf, err := NewBuffer(4096, BufferOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	b.ReportAllocs()
	for b.Loop() {
		buf.LoadByte(4095)
	}
}
