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
