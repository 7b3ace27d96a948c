package vm

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestPeersComeFromTheKernelsSuite checks that each suite's peers are
// fetched from that suite, under its own names, with its own C runtime,
// into a directory of their own: trixie's rdma-core 56 beside bookworm's 44.
func TestPeersComeFromTheKernelsSuite(t *testing.T) {
	host, err := HostArch()
	if err != nil {
		t.Skip(err)
	}
	var downloads [][]string
	fake := func(dir, name string, args ...string) ([]byte, error) {
		switch name {
		case "apt-get":
			i := slices.Index(args, "download")
			if i < 0 {
				return nil, nil // update
			}
			downloads = append(downloads, args)
			for _, p := range args[i+1:] {
				os.WriteFile(filepath.Join(dir, p+"_1.0_"+host.Deb+".deb"), []byte("!<arch>\n"), 0o644)
			}
		}
		return nil, nil
	}
	dir := t.TempDir()
	own := &Cache{Dir: dir, Log: io.Discard, exec: fake}
	got, err := own.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dir, "peers") || len(downloads) != 1 || slices.Contains(downloads[0], "libc6") ||
		!slices.Contains(downloads[0], "librdmacm1") || strings.HasPrefix(downloads[0][0], "-o") {
		t.Fatalf("bookworm: %s from %q; want peers, the machine's own packages without libc6", got, downloads)
	}
	trixie := &Cache{Dir: dir, Suite: "trixie", Log: io.Discard, exec: fake}
	got, err = trixie.Peers()
	if err != nil {
		if strings.Contains(err.Error(), "no apt source") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if len(downloads) != 2 {
		t.Fatalf("trixie: %d downloads, want 2", len(downloads))
	}
	d := downloads[1]
	if got != filepath.Join(dir, "peers-trixie") || !slices.Contains(d, "librdmacm1t64") || slices.Contains(d, "librdmacm1") ||
		!slices.Contains(d, "libc6") || !slices.ContainsFunc(d, func(o string) bool { return strings.Contains(o, filepath.Join("apt", "trixie")) }) {
		t.Fatalf("trixie: %s from %q; want peers-trixie, trixie's names and C runtime from trixie's lists", got, d)
	}
	if _, err := os.Stat(filepath.Join(dir, "peers", completeMarker)); err != nil {
		t.Errorf("bookworm's peers went: %v", err)
	}
}

// TestNeededInMergedUsr resolves a tree of merged-/usr packages (trixie's
// libc6 ships /usr/lib64/ld-linux-x86-64.so.2, the /lib64 link comes from
// base-files, which the peers do not include): the ELF's interpreter
// /lib64/... is found under /usr and given to the guest at /lib64.
func TestNeededInMergedUsr(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("uses the amd64 host's /bin/true as the sample")
	}
	const triple = "x86_64-linux-gnu"
	root := t.TempDir()
	copyFile(t, filepath.Join(root, "usr/bin/true"), "/bin/true")
	copyFile(t, filepath.Join(root, "usr/lib", triple, "ld-linux-x86-64.so.2"), "/lib/"+triple+"/ld-linux-x86-64.so.2")
	os.MkdirAll(filepath.Join(root, "usr/lib64"), 0o755)
	os.Symlink("../lib/"+triple+"/ld-linux-x86-64.so.2", filepath.Join(root, "usr/lib64/ld-linux-x86-64.so.2"))
	copyFile(t, filepath.Join(root, "usr/lib", triple, "libc.so.6"), "/lib/"+triple+"/libc.so.6")
	libs, err := neededIn(root, triple, []string{filepath.Join(root, "usr/bin/true")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range libs {
		if l.guest == "/lib64/ld-linux-x86-64.so.2" {
			found = l.host == filepath.Join(root, "usr/lib", triple, "ld-linux-x86-64.so.2")
		}
	}
	if !found {
		t.Errorf("libraries %v: want /lib64/ld-linux-x86-64.so.2 from the tree's /usr/lib64", libs)
	}
	if !ownRuntime(root, AMD64) {
		t.Error("ownRuntime: a tree with libc.so.6 under /usr/lib reported without one")
	}
}
