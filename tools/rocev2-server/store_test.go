package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// On a full disk (/dev/full: every write fails with ENOSPC) the store
// stops at the first error, reports it once and keeps it for the summary
// and the exit status; nothing after it is counted as stored.
func TestStoreFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	var reported []error
	s, err := openStore("/dev/full", func(err error) { reported = append(reported, err) })
	if err != nil {
		t.Fatal(err)
	}
	frame := bytes.Repeat([]byte{7}, 9000)
	for range 300 { // 2.7 MB: the 1 MiB buffer is written out on the way
		s.write(frame)
	}
	err = s.close()
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "/dev/full") {
		t.Fatalf("close after writing to /dev/full: %v, want ENOSPC naming the file", err)
	}
	if len(reported) != 1 || reported[0] != err {
		t.Errorf("reported %v, want the one error %v", reported, err)
	}
	if s.frames >= 300 || s.onDisk != 0 {
		t.Errorf("%d frames counted as stored, %d bytes on disk; want fewer than 300 and 0", s.frames, s.onDisk)
	}
	if sum := s.summary(); !strings.Contains(sum, "STOPPED") || !strings.Contains(sum, "no space left on device") {
		t.Errorf("summary %q does not say storing stopped and why", sum)
	}
}

// An error that shows only at the final flush (a few frames, all still
// buffered) is reported too.
func TestStoreFlushError(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	s, err := openStore("/dev/full", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.write([]byte("one frame"))
	if err := s.close(); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "flush") {
		t.Fatalf("close: %v, want the flush's ENOSPC", err)
	}
}

// Without an error every payload reaches the file, appended in order.
func TestStoreAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frames.bin")
	if err := os.WriteFile(path, []byte("old|"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := openStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.write([]byte("a"))
	s.write([]byte("bc"))
	for range 2 { // idempotent
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "old|abc" {
		t.Errorf("file %q, want %q", b, "old|abc")
	}
	if sum := s.summary(); sum != "output "+path+": 2 frames, 3 bytes" {
		t.Errorf("summary %q", sum)
	}
}
