package vm

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A C peer is compiled once per source: a second build of the same source
// reuses the cached binary, a changed source is compiled again, and a
// foreign architecture uses its cross gcc and its own peers' libraries.
func TestBuildCPeerCachedBySource(t *testing.T) {
	var calls [][]string
	c := &Cache{Dir: t.TempDir(), Log: io.Discard, exec: func(dir, name string, args ...string) ([]byte, error) {
		calls = append(calls, append([]string{name}, args...))
		out := args[slices.Index(args, "-o")+1]
		return nil, os.WriteFile(out, []byte("ELF"), 0o755)
	}}
	src := filepath.Join(t.TempDir(), "peer.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(cc string, a Arch) string {
		t.Helper()
		bin, err := c.buildCPeer(cc, a, src, "/inc", "/peers")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("no binary at %s: %v", bin, err)
		}
		return bin
	}
	first := build("gcc", AMD64)
	if len(calls) != 1 || calls[0][0] != "gcc" || !slices.Contains(calls[0], "-l:librdmacm.so.1") ||
		!slices.Contains(calls[0], "/peers/usr/lib/x86_64-linux-gnu") {
		t.Fatalf("compiler calls %q", calls)
	}
	if again := build("gcc", AMD64); again != first || len(calls) != 1 {
		t.Errorf("same source: %s after %s, %d compiler calls; want the cached binary", again, first, len(calls))
	}
	if err := os.WriteFile(src, []byte("int main(void) { return 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed := build("gcc", AMD64); changed == first || len(calls) != 2 {
		t.Errorf("changed source: %s (first %s), %d compiler calls; want a new build", changed, first, len(calls))
	}
	build("aarch64-linux-gnu-gcc", ARM64)
	if last := calls[len(calls)-1]; last[0] != "aarch64-linux-gnu-gcc" || !slices.Contains(last, "/peers/usr/lib/aarch64-linux-gnu") {
		t.Errorf("arm64 build %q", last)
	}
}

// ModuleDir finds pureverbs' files through the build list: from inside the
// repository (go test runs rxevm exec in the package's directory), from a
// nested module replacing it with ../.., and from a module elsewhere that
// requires it, as an outside module requires its module cache copy; the
// walk up the directories that ModuleDir replaced found only the first two.
func TestModuleDir(t *testing.T) {
	t.Setenv("GOWORK", "off")
	write := func(dir, gomod string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(t.TempDir(), "pureverbs")
	write(root, "module "+ModulePath+"\n\ngo 1.26\n")
	if err := os.MkdirAll(filepath.Join(root, "integration"), 0o755); err != nil {
		t.Fatal(err)
	}
	requires := func(target string) string {
		return "module example.com/x\n\ngo 1.26\n\nrequire " + ModulePath + " v0.0.0\n\nreplace " + ModulePath + " => " + target + "\n"
	}
	nested := filepath.Join(root, "integration", "example")
	write(nested, requires("../.."))
	outside := filepath.Join(t.TempDir(), "app")
	write(outside, requires(root))
	for _, d := range []string{root, filepath.Join(root, "integration"), nested, outside} {
		if got, err := ModuleDir(d); err != nil || got != root {
			t.Errorf("ModuleDir(%s) = %q, %v; want %s", d, got, err, root)
		}
	}
	lone := t.TempDir()
	write(lone, "module example.com/lone\n\ngo 1.26\n")
	if dir, err := ModuleDir(lone); err == nil {
		t.Errorf("ModuleDir in a module without pureverbs = %q, no error", dir)
	}
}
