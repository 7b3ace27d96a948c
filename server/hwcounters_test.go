package server

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadHWCounters(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "rxe0", "ports", "1", "hw_counters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "send_rnr_err"), []byte("12\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "rcvd_pkts"), []byte("345\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "lifespan"), []byte("10 ms\n"), 0o644)
	old := sysfsRoot
	sysfsRoot = root
	defer func() { sysfsRoot = old }()
	c, err := readHWCounters("rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 2 || c["send_rnr_err"] != 12 || c["rcvd_pkts"] != 345 {
		t.Fatalf("%v", c)
	}
	if _, err := readHWCounters("rxe9", 1); err == nil {
		t.Fatal("a missing device has counters")
	}
}
