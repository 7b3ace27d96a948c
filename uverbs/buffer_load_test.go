package uverbs

import "testing"

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
