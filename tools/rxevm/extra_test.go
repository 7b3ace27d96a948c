package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/tools/rxevm/internal/vm"
)

func build(t *testing.T, goarch string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() {}\n"), 0o644)
	out := filepath.Join(dir, "mine")
	cmd := exec.Command("go", "build", "-o", out, filepath.Join(dir, "main.go"))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GO111MODULE=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func TestParseExtra(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("assumes an amd64 host")
	}
	amd, arm := build(t, "amd64"), build(t, "arm64")
	got, err := parseExtra(" "+amd+" , "+amd+":/opt/bin/other,", vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["/usr/local/bin/mine"] != amd || got["/opt/bin/other"] != amd {
		t.Errorf("parsed %v", got)
	}
	if got, err := parseExtra("", vm.AMD64); err != nil || len(got) != 0 {
		t.Errorf("empty list: %v, %v", got, err)
	}
	for _, tc := range []struct {
		spec string
		arch vm.Arch
		want string
	}{
		{arm, vm.AMD64, "the guest is amd64"},
		{amd, vm.ARM64, "the guest is arm64"},
		{amd + ":bin/x", vm.AMD64, "must be absolute"},
		{amd + "," + amd, vm.AMD64, "two programs for /usr/local/bin/mine"},
		{"/nonexistent/prog", vm.AMD64, "/nonexistent/prog"},
		{"/etc/hostname", vm.AMD64, "/etc/hostname"},
	} {
		if _, err := parseExtra(tc.spec, tc.arch); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q for %s: %v; want an error saying %q", tc.spec, tc.arch.GOARCH, err, tc.want)
		}
	}
}

func TestVMTimeout(t *testing.T) {
	t.Setenv("RXEVM_TIMEOUT", "")
	if d := vmTimeout([]string{"-test.v", "-test.timeout=20m0s"}); d.String() != "23m0s" {
		t.Errorf("timeout from -test.timeout: %v", d)
	}
	if d := vmTimeout(nil); d.String() != "13m0s" {
		t.Errorf("default timeout: %v", d)
	}
	t.Setenv("RXEVM_TIMEOUT", "90s")
	if d := vmTimeout([]string{"-test.timeout=20m0s"}); d.String() != "1m30s" {
		t.Errorf("RXEVM_TIMEOUT: %v", d)
	}
}
