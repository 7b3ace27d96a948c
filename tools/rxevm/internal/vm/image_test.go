package vm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// An Unloaded module is in the image with what it needs, beside the
// modules.dep and modules.builtin the guest loads it with, but not in the
// plan's load list; the modules other ones need still load.
func TestImageUnloadedModulesAreShippedNotLoaded(t *testing.T) {
	kdir := filepath.Join(t.TempDir(), "6.1.0-57-amd64")
	files := map[string]string{
		"modules.dep":     "kernel/a/ib_core.ko:\nkernel/b/rdma_rxe.ko: kernel/a/ib_core.ko\nkernel/c/rdma_ucm.ko: kernel/a/ib_core.ko\nkernel/d/crc32_generic.ko:\n",
		"modules.builtin": "kernel/e/configfs.ko\n",
	}
	for _, f := range []string{"a/ib_core.ko", "b/rdma_rxe.ko", "c/rdma_ucm.ko", "d/crc32_generic.ko"} {
		files["kernel/"+f] = "module " + f
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(kdir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(kdir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	init := filepath.Join(t.TempDir(), "init")
	if err := os.WriteFile(init, []byte("init"), 0o755); err != nil {
		t.Fatal(err)
	}
	im := Image{
		Init: init, Arch: Arch{GOARCH: "amd64"}, Plan: &Plan{Topology: TopologyNone}, Kernel: Kernel{Modules: kdir},
		Files: map[string]string{}, Modules: []string{"crc32_generic", "rdma_rxe", "rdma_ucm"}, Unloaded: []string{"crc32_generic", "rdma_rxe"},
	}
	out := filepath.Join(t.TempDir(), "initrd.cpio")
	if err := im.Build(out); err != nil {
		t.Fatal(err)
	}
	want := []string{"/lib/modules/6.1.0-57-amd64/kernel/a/ib_core.ko", "/lib/modules/6.1.0-57-amd64/kernel/c/rdma_ucm.ko"}
	if d := cmp.Diff(want, im.Plan.Modules); d != "" {
		t.Errorf("modules the guest loads (-want +got):\n%s", d)
	}
	cpio, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kernel/b/rdma_rxe.ko", "kernel/d/crc32_generic.ko", "modules.dep", "modules.builtin"} {
		if !bytes.Contains(cpio, []byte("lib/modules/6.1.0-57-amd64/"+f+"\x00")) {
			t.Errorf("the image lacks lib/modules/6.1.0-57-amd64/%s", f)
		}
	}
}
