package vm

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeApt answers apt-get update and apt-cache depends as an apt whose
// lists name kernel before an update and updated after one, and records
// every call.
type fakeApt struct {
	kernel, updated string
	calls           []string
}

func (f *fakeApt) exec(dir, name string, args ...string) ([]byte, error) {
	call := name + " " + strings.Join(args, " ")
	f.calls = append(f.calls, call)
	switch {
	case name == "apt-get" && args[len(args)-1] == "update":
		f.kernel = f.updated
		return nil, nil
	case name == "apt-cache" && strings.HasSuffix(call, "depends linux-image-amd64"):
		return []byte("linux-image-amd64\n  Depends: " + f.kernel + "\n"), nil
	}
	return nil, fmt.Errorf("fake apt: unexpected %s", call)
}

func TestKernelPackageResolvedOnceAfterRefresh(t *testing.T) {
	apt := &fakeApt{kernel: "linux-image-6.1.0-48-amd64", updated: "linux-image-6.1.0-57-amd64"}
	c := &Cache{Dir: t.TempDir(), Arch: AMD64, Log: io.Discard, exec: apt.exec}
	// A fresh cache: the lists are refreshed before apt is asked, so the
	// stale 6.1.0-48 is never chosen.
	got, err := c.KernelPackage(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != "linux-image-6.1.0-57-amd64" {
		t.Fatalf("first choice %s, want the one after an update", got)
	}
	// The archive moves on; every later run (the two-VM suite, another
	// project) still boots the recorded kernel without asking apt.
	apt.updated = "linux-image-6.1.0-58-amd64"
	n := len(apt.calls)
	for i := 0; i < 3; i++ {
		if got, err := c.KernelPackage(nil); err != nil || got != "linux-image-6.1.0-57-amd64" {
			t.Fatalf("later choice %s, %v; want the recorded 6.1.0-57", got, err)
		}
	}
	if len(apt.calls) != n {
		t.Errorf("apt was asked again: %q", apt.calls[n:])
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, "kernel", "choice-bookworm-amd64"))
	if err != nil || strings.TrimSpace(string(b)) != "linux-image-6.1.0-57-amd64" {
		t.Errorf("choice file %q, %v", b, err)
	}
}

func TestKernelPackageOverrides(t *testing.T) {
	apt := &fakeApt{kernel: "linux-image-6.1.0-57-amd64", updated: "linux-image-6.1.0-57-amd64"}
	c := &Cache{Dir: t.TempDir(), Arch: AMD64, Log: io.Discard, exec: apt.exec}
	if _, err := c.KernelPackage(nil); err != nil {
		t.Fatal(err)
	}

	t.Setenv(EnvKernelPackage, "linux-image-6.1.0-40-amd64")
	if got, err := c.KernelPackage(nil); err != nil || got != "linux-image-6.1.0-40-amd64" {
		t.Errorf("%s: got %s, %v", EnvKernelPackage, got, err)
	}
	t.Setenv(EnvKernelPackage, "-oAPT::Foo=1")
	if _, err := c.KernelPackage(nil); err == nil {
		t.Errorf("%s accepted an apt option", EnvKernelPackage)
	}
	t.Setenv(EnvKernelPackage, "")

	apt.updated = "linux-image-6.1.0-58-amd64"
	t.Setenv(EnvKernelRefresh, "1")
	if got, err := c.KernelPackage(nil); err != nil || got != "linux-image-6.1.0-58-amd64" {
		t.Errorf("refresh: got %s, %v; want the newly resolved package", got, err)
	}
	t.Setenv(EnvKernelRefresh, "")
	if got, _ := c.KernelPackage(nil); got != "linux-image-6.1.0-58-amd64" {
		t.Errorf("after a refresh the new choice is not kept: %s", got)
	}

	// A damaged choice file is resolved again, not passed to apt.
	os.WriteFile(c.choiceFile(), []byte("--junk\n"), 0o644)
	if got, _ := c.KernelPackage(nil); got != "linux-image-6.1.0-58-amd64" {
		t.Errorf("damaged choice file: got %s", got)
	}
}

func TestKernelChoicePerSuiteAndArch(t *testing.T) {
	dir := t.TempDir()
	a := (&Cache{Dir: dir, Arch: AMD64}).choiceFile()
	b := (&Cache{Dir: dir, Arch: ARM64}).choiceFile()
	c := (&Cache{Dir: dir, Arch: AMD64, Suite: "trixie"}).choiceFile()
	if a == b || a == c || b == c {
		t.Errorf("choice files collide: %s %s %s", a, b, c)
	}
}
