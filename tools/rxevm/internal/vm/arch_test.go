package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// buildFor compiles a trivial static program for goarch.
func buildFor(t *testing.T, goarch string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644)
	out := filepath.Join(dir, "prog-"+goarch)
	cmd := exec.Command("go", "build", "-o", out, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GO111MODULE=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func TestSelectArch(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the table assumes an amd64 host")
	}
	amd, arm := buildFor(t, "amd64"), buildFor(t, "arm64")
	for _, tc := range []struct {
		env, binary string
		want        string // GOARCH, or an error substring after "!"
	}{
		{"", "", "amd64"},
		{"arm64", "", "arm64"},
		{"", arm, "arm64"}, // GOARCH=arm64 go test -exec picks the arm64 guest itself
		{"", amd, "amd64"},
		{"arm64", arm, "arm64"},
		{"arm64", amd, "!set GOARCH=arm64"},
		{"amd64", arm, "!set GOARCH=amd64"},
		{"riscv64", "", "!unsupported guest architecture"},
		{"", "/etc/hostname", "!/etc/hostname"},
	} {
		got, err := SelectArch(tc.env, tc.binary)
		if want, ok := strings.CutPrefix(tc.want, "!"); ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("env %q binary %q: %v, %v; want an error saying %q", tc.env, filepath.Base(tc.binary), got.GOARCH, err, want)
			}
			continue
		}
		if err != nil || got.GOARCH != tc.want {
			t.Errorf("env %q binary %q: %q, %v; want %s", tc.env, filepath.Base(tc.binary), got.GOARCH, err, tc.want)
		}
	}
}

func TestArchTable(t *testing.T) {
	for _, a := range []Arch{AMD64, ARM64} {
		b, err := ArchByName(a.GOARCH)
		if err != nil || b.QEMU != a.QEMU {
			t.Errorf("%s: %v", a.GOARCH, err)
		}
		if a.Console == "" || a.Output == "" || len(a.OutputArgs) == 0 || !strings.HasPrefix(a.KernelMeta, "linux-image-") {
			t.Errorf("%s is incomplete: %+v", a.GOARCH, a)
		}
	}
	// The virt machine's console is its one PL011; the tests' output needs
	// a virtio console and its module.
	args := strings.Join(qemuArgs(ARM64, "k", "i", "c.log", 1024, 2, false, ""), " ")
	for _, want := range []string{"-M virt", "console=ttyAMA0", "-serial file:c.log", "virtconsole,chardev=out", "-accel tcg"} {
		if !strings.Contains(args, want) {
			t.Errorf("arm64 qemu arguments lack %q: %s", want, args)
		}
	}
	args = strings.Join(qemuArgs(AMD64, "k", "i", "c.log", 1024, 2, false, ""), " ")
	for _, want := range []string{"console=ttyS0", "clocksource=tsc", "-serial file:c.log -serial stdio"} {
		if !strings.Contains(args, want) {
			t.Errorf("amd64 qemu arguments lack %q: %s", want, args)
		}
	}
	if strings.Contains(args, "virt") {
		t.Errorf("amd64 arguments name the arm virt machine: %s", args)
	}
}

func TestIsStatic(t *testing.T) {
	if ok, err := IsStatic(buildFor(t, runtime.GOARCH)); err != nil || !ok {
		t.Errorf("a CGO_ENABLED=0 Go program: static %v, %v", ok, err)
	}
	if ok, err := IsStatic("/bin/ls"); err != nil || ok {
		t.Errorf("/bin/ls: static %v, %v; want dynamic", ok, err)
	}
}
