package uverbs

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMRSGEBounds(t *testing.T) {
	mr := &MR{addr: 0x10000, length: 4096, lkey: 7}
	got, err := mr.SGE(100, 200)
	if err != nil || got != (SGE{Addr: 0x10000 + 100, Length: 200, LKey: 7}) {
		t.Fatalf("SGE(100, 200) = %+v, %v", got, err)
	}
	if got, err := mr.SGE(0, 4096); err != nil || got.Length != 4096 {
		t.Fatalf("the whole region: %+v, %v", got, err)
	}
	if got, err := mr.SGE(4096, 0); err != nil || got.Addr != 0x10000+4096 {
		t.Fatalf("empty SGE at the end: %+v, %v", got, err)
	}
	for _, c := range [][2]int{{-1, 1}, {0, -1}, {4000, 97}, {4097, 0}, {1, 4096}, {0, 1 << 33}} {
		if _, err := mr.SGE(c[0], c[1]); !errors.Is(err, unix.EINVAL) {
			t.Errorf("SGE(%d, %d): %v, want EINVAL", c[0], c[1], err)
		}
	}
}
