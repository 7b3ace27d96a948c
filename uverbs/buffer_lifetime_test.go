package uverbs

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
)

// The memory of a Buffer dropped without Close stays mapped under the
// slices taken from it: writing one after the garbage collector has run
// the Buffer's cleanup must not fault. The leak check names the Buffer
// and where it was created instead.
func TestBufferDroppedBytesStayValid(t *testing.T) {
	leakcheck.Take()
	mem := func() []byte {
		b, err := NewBuffer(1<<16, BufferOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := b.Bytes()
		for i := range m {
			m[i] = byte(i % 251)
		}
		return m
	}()
	var leaks []leakcheck.Leak
	for i := 0; i < 200 && len(leaks) == 0; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		leaks = leakcheck.Take()
	}
	for range 3 {
		runtime.GC()
	}
	// Unmapped, the slice faults; unmapped and mapped again by whatever
	// came next, it shows that memory instead of the Buffer's.
	for i := range mem {
		if mem[i] != byte(i%251) {
			t.Fatalf("byte %d of the dropped Buffer's slice changed to %#x: its memory was released", i, mem[i])
		}
		mem[i] = 0
	}
	if len(leaks) != 1 || !strings.Contains(leaks[0].What, "uverbs.Buffer of 65536 bytes") {
		t.Fatalf("leaks reported for the dropped Buffer: %v", leaks)
	}
	if !strings.Contains(leaks[0].Created, "TestBufferDroppedBytesStayValid") {
		t.Errorf("the leak does not name its creation: %q", leaks[0].Created)
	}
}

// Bytes, Addr and Len race with Close without a data race (go test -race):
// they return the memory or, once closed, nil and 0.
func TestBufferAccessorsRaceClose(t *testing.T) {
	for range 20 {
		b, err := NewBuffer(4096, BufferOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for range 100 {
					if m := b.Bytes(); m != nil && len(m) != 4096 {
						t.Errorf("Bytes of %d bytes", len(m))
					}
					_ = b.Addr()
					_ = b.Len()
				}
			})
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if b.Bytes() != nil || b.Addr() != 0 {
			t.Fatal("Bytes/Addr after Close are not nil/0")
		}
	}
}
