package uverbs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// vmFlags returns the VmFlags line of the mapping starting at addr, from
// /proc/self/smaps.
func vmFlags(t *testing.T, addr uint64) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	prefix := fmt.Sprintf("%x-", addr)
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, prefix) {
			in = true
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return strings.Fields(v)
		}
	}
	t.Fatalf("mapping at %#x not in smaps", addr)
	return nil
}

func TestBuffer(t *testing.T) {
	page := unix.Getpagesize()
	b, err := NewBuffer(page+1, BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != page+1 || len(b.Bytes()) != page+1 || b.MappedLen() != 2*page {
		t.Errorf("Len %d, Bytes %d, MappedLen %d; want %d, %d, %d", b.Len(), len(b.Bytes()), b.MappedLen(), page+1, page+1, 2*page)
	}
	if b.Addr()%uint64(page) != 0 {
		t.Errorf("Addr %#x not page aligned", b.Addr())
	}
	for _, c := range b.Bytes() {
		if c != 0 {
			t.Fatal("new buffer not zeroed")
		}
	}
	b.Bytes()[page] = 7 // writable across the page boundary
	flags := vmFlags(t, b.Addr())
	if !contains(flags, "dc") { // VM_DONTCOPY, set by MADV_DONTFORK
		t.Errorf("mapping flags %v lack dc (MADV_DONTFORK)", flags)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if b.Bytes() != nil {
		t.Error("Bytes after Close is not nil")
	}
	if err := b.register(); !errors.Is(err, ErrClosed) {
		t.Errorf("register on a closed buffer = %v, want ErrClosed", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestBufferBadSize(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := NewBuffer(n, BufferOptions{}); !errors.Is(err, unix.EINVAL) {
			t.Errorf("NewBuffer(%d) = %v, want EINVAL", n, err)
		}
	}
}

// readMeminfo returns a /proc/meminfo value (huge page counts are plain
// numbers).
func readMeminfo(t *testing.T, key string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	t.Skipf("no %s in /proc/meminfo", key)
	return 0
}

func TestBufferHugePages(t *testing.T) {
	free := readMeminfo(t, "HugePages_Free")
	overcommit, _ := readInt("/proc/sys/vm/nr_overcommit_hugepages")
	b, err := NewBuffer(100, BufferOptions{HugePages: true})
	if free == 0 && overcommit == 0 {
		if !errors.Is(err, ErrNoHugePages) || !errors.Is(err, unix.ENOMEM) {
			t.Fatalf("NewBuffer(huge) with no huge pages = %v, %v; want ErrNoHugePages", b, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("NewBuffer(huge) with %d free huge pages: %v", free, err)
	}
	defer b.Close()
	if b.MappedLen() != hugePageSize || b.Addr()%hugePageSize != 0 {
		t.Errorf("huge buffer maps %d bytes at %#x", b.MappedLen(), b.Addr())
	}
}
