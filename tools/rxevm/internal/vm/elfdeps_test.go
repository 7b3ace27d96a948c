package vm

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func copyFile(t *testing.T, dst, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Skipf("host file %s: %v", src, err)
	}
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestNeededInResolvesInsideTheTree builds an unpacked tree the way dpkg -x
// leaves a foreign architecture's packages: libraries under /lib/<triple>,
// the loader reached through an absolute symbolic link that must be
// followed inside the tree, not on the host.
func TestNeededInResolvesInsideTheTree(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("uses the amd64 host's /bin/true as the sample")
	}
	const triple = "x86_64-linux-gnu"
	root := t.TempDir()
	copyFile(t, filepath.Join(root, "usr/bin/true"), "/bin/true")
	prog := []string{filepath.Join(root, "usr/bin/true")}

	if _, err := neededIn(root, triple, prog, nil); err == nil || !strings.Contains(err.Error(), "ld-linux-x86-64.so.2") {
		t.Fatalf("a tree without the loader: %v; want an error naming it", err)
	}
	copyFile(t, filepath.Join(root, "lib", triple, "ld-linux-x86-64.so.2"), "/lib/"+triple+"/ld-linux-x86-64.so.2")
	os.MkdirAll(filepath.Join(root, "lib64"), 0o755)
	// Absolute: on the host this would name the host's own loader.
	os.Symlink("/lib/"+triple+"/ld-linux-x86-64.so.2", filepath.Join(root, "lib64", "ld-linux-x86-64.so.2"))
	if _, err := neededIn(root, triple, prog, nil); err == nil || !strings.Contains(err.Error(), "needs libc.so.6") {
		t.Fatalf("a tree without libc: %v; want an error naming libc.so.6", err)
	}
	copyFile(t, filepath.Join(root, "lib", triple, "libc.so.6.real"), "/lib/"+triple+"/libc.so.6")
	os.Symlink("libc.so.6.real", filepath.Join(root, "lib", triple, "libc.so.6"))
	copyFile(t, filepath.Join(root, "usr/lib", triple, "libgcc_s.so.1"), "/lib/"+triple+"/libgcc_s.so.1")

	libs, err := neededIn(root, triple, prog, []string{"libgcc_s.so.1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range libs {
		if !strings.HasPrefix(l.host, root) {
			t.Errorf("%s resolved outside the tree: %s", l.guest, l.host)
		}
		got = append(got, l.guest+" <- "+strings.TrimPrefix(l.host, root))
	}
	sort.Strings(got)
	want := []string{
		"/lib/" + triple + "/ld-linux-x86-64.so.2 <- /lib/" + triple + "/ld-linux-x86-64.so.2", // libc's DT_NEEDED
		"/lib/" + triple + "/libc.so.6 <- /lib/" + triple + "/libc.so.6.real",
		"/lib64/ld-linux-x86-64.so.2 <- /lib/" + triple + "/ld-linux-x86-64.so.2",
		"/usr/lib/" + triple + "/libgcc_s.so.1 <- /usr/lib/" + triple + "/libgcc_s.so.1",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("libraries (-want +got):\n%s", d)
	}
}
