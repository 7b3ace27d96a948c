package vm

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envBootChild makes the test binary a harness process that boots a fake
// QEMU and waits for it: TestQEMUDiesWithHarness kills that process.
const envBootChild = "RXEVM_TEST_BOOT_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envBootChild); dir != "" {
		b := &Boot{
			Arch:    Arch{GOARCH: runtime.GOARCH, QEMU: filepath.Join(dir, "qemu")},
			Dir:     dir,
			Timeout: time.Minute,
			Output:  io.Discard,
			Log:     io.Discard,
		}
		b.Run(context.Background())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A harness killed with SIGKILL (go test's -timeout, a CI runner) takes its
// QEMU with it: an orphaned VM would keep both cores busy for its timeout.
func TestQEMUDiesWithHarness(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "qemu.pid")
	script := "#!/bin/sh\necho $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + "\nexec sleep 120\n"
	if err := os.WriteFile(filepath.Join(dir, "qemu"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envBootChild+"="+dir)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()

	var pid int
	for deadline := time.Now().Add(20 * time.Second); pid == 0; {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake QEMU never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)

	child.Process.Kill()
	child.Wait()
	for deadline := time.Now().Add(5 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("QEMU (pid %d) still runs 5 s after its harness was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie waiting for its
// new parent to reap it.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
