package vm

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestReadGuestStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		status   int
		finished bool
		out      string
	}{
		{"pass", StartMarker + "\r\n=== RUN TestX\r\nPASS\r\n\r\n" + ExitMarker + " 0\r\n", 0, true, "=== RUN TestX\nPASS\n\n"},
		{"fail", StartMarker + "\n--- FAIL: TestX\n" + ExitMarker + " 1\n", 1, true, "--- FAIL: TestX\n"},
		// A guest that died (panic, oops, reset) never prints the marker.
		{"no marker", StartMarker + "\npanic: boom\n", 0, false, "panic: boom\n"},
		{"garbled marker", ExitMarker + " x\n", 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			status, finished := readGuest(strings.NewReader(tc.in), &out, &lastLines{n: 3})
			if status != tc.status || finished != tc.finished {
				t.Errorf("got status %d finished %v, want %d %v", status, finished, tc.status, tc.finished)
			}
			if out.String() != tc.out {
				t.Errorf("output %q, want %q", out.String(), tc.out)
			}
		})
	}
}

func TestKernelTroubleOnConsole(t *testing.T) {
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.log")
	oops := filepath.Join(dir, "oops.log")
	os.WriteFile(clean, []byte("[    1.0] rdma_rxe: loaded\n[    2.0] WARNING-free boot\n"), 0o644)
	os.WriteFile(oops, []byte("[    1.0] ok\n[    3.1] BUG: kernel NULL pointer dereference, address: 0000000000000008\n"), 0o644)
	if got := firstMatch(clean, kernelTrouble); got != "" {
		t.Errorf("clean console flagged: %q", got)
	}
	if got := firstMatch(oops, kernelTrouble); !strings.Contains(got, "NULL pointer") {
		t.Errorf("oops not found, got %q", got)
	}
}

func TestLastLinesKeepsTheTail(t *testing.T) {
	l := &lastLines{n: 2}
	for _, s := range []string{"a", "b", "c"} {
		l.add(s)
	}
	if got := l.String(); got != "  b\n  c\n" {
		t.Errorf("tail %q", got)
	}
}

// RXEVM_ICOUNT's options reach QEMU with the RTC on the virtual clock and
// the delay-loop constant on the kernel command line; without them, or
// under KVM, neither appears.
func TestQEMUArgsICount(t *testing.T) {
	joined := func(icount string, kvm bool) string {
		return strings.Join(qemuArgs(AMD64, "vmlinuz", "initrd", "console.log", 2048, 2, kvm, icount), " ")
	}
	got := joined("shift=0,sleep=off", false)
	for _, want := range []string{"-accel tcg", "-icount shift=0,sleep=off", "-rtc clock=vm", "lpj=4000000", "maxcpus=1", "-smp 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("with icount: %q lacks %q", got, want)
		}
	}
	for _, args := range []string{joined("", false), joined("shift=0", true)} {
		for _, unwanted := range []string{"-icount", "-rtc", "lpj=", "maxcpus="} {
			if strings.Contains(args, unwanted) {
				t.Errorf("without icount or under KVM: %q has %q", args, unwanted)
			}
		}
	}
}

// RXEVM_PLUGIN reaches QEMU as one -plugin argument under TCG; with KVM
// the boot is refused before QEMU starts.
func TestBootPlugin(t *testing.T) {
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\n"
	if err := os.WriteFile(filepath.Join(dir, "qemu"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	boot := func(kvm bool) error {
		b := &Boot{Arch: Arch{GOARCH: runtime.GOARCH, QEMU: filepath.Join(dir, "qemu")}, Dir: dir, Timeout: time.Minute,
			Output: io.Discard, Log: io.Discard, KVM: kvm, Plugin: "/p/insnprof.so,out=/p/x.prof"}
		_, err := b.Run(context.Background())
		return err
	}
	boot(false) // the fake QEMU prints no exit marker: an error, but its arguments are written
	b, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n-plugin\n/p/insnprof.so,out=/p/x.prof\n") {
		t.Errorf("QEMU's arguments lack the plugin:\n%s", b)
	}
	os.Remove(argsFile)
	if err := boot(true); err == nil || !strings.Contains(err.Error(), EnvPlugin) {
		t.Errorf("a plugin under KVM: %v, want a refusal naming %s", err, EnvPlugin)
	}
	if _, err := os.Stat(argsFile); err == nil {
		t.Error("QEMU started under KVM with a plugin")
	}
}
