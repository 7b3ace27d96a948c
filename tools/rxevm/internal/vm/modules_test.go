package vm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/rxe/rxelink"
)

func writeDep(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The lines are the ones depmod wrote for Debian's 6.1.0-57 kernel.
const debian61Dep = `kernel/crypto/crc32_generic.ko:
kernel/drivers/net/veth.ko:
kernel/drivers/infiniband/core/ib_core.ko:
kernel/net/ipv4/udp_tunnel.ko:
kernel/net/ipv6/ip6_udp_tunnel.ko:
kernel/drivers/infiniband/core/ib_uverbs.ko: kernel/drivers/infiniband/core/ib_core.ko
kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko: kernel/drivers/infiniband/core/ib_uverbs.ko kernel/drivers/infiniband/core/ib_core.ko kernel/net/ipv6/ip6_udp_tunnel.ko kernel/net/ipv4/udp_tunnel.ko
kernel/fs/configfs/configfs.ko:
kernel/drivers/infiniband/core/ib_cm.ko: kernel/drivers/infiniband/core/ib_core.ko
kernel/drivers/infiniband/core/iw_cm.ko: kernel/drivers/infiniband/core/ib_core.ko
kernel/drivers/infiniband/core/rdma_cm.ko: kernel/drivers/infiniband/core/iw_cm.ko kernel/drivers/infiniband/core/ib_cm.ko kernel/drivers/infiniband/core/ib_core.ko kernel/fs/configfs/configfs.ko
kernel/drivers/infiniband/core/rdma_ucm.ko: kernel/drivers/infiniband/core/ib_uverbs.ko kernel/drivers/infiniband/core/rdma_cm.ko kernel/drivers/infiniband/core/iw_cm.ko kernel/drivers/infiniband/core/ib_cm.ko kernel/drivers/infiniband/core/ib_core.ko kernel/fs/configfs/configfs.ko
kernel/net/sched/sch_netem.ko:
kernel/net/sched/sch_prio.ko:
kernel/net/sched/cls_u32.ko:
`

func TestResolveOrdersDependenciesFirst(t *testing.T) {
	idx, err := rxelink.ReadModuleIndex(writeDep(t, debian61Dep))
	if err != nil {
		t.Fatal(err)
	}
	got, err := idx.Resolve(RxeModules...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kernel/crypto/crc32_generic.ko",
		"kernel/drivers/infiniband/core/ib_core.ko",
		"kernel/drivers/infiniband/core/ib_uverbs.ko",
		"kernel/net/ipv6/ip6_udp_tunnel.ko",
		"kernel/net/ipv4/udp_tunnel.ko",
		"kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko",
		"kernel/drivers/net/veth.ko",
		"kernel/drivers/infiniband/core/iw_cm.ko",
		"kernel/drivers/infiniband/core/ib_cm.ko",
		"kernel/fs/configfs/configfs.ko",
		"kernel/drivers/infiniband/core/rdma_cm.ko",
		"kernel/drivers/infiniband/core/rdma_ucm.ko",
		"kernel/net/sched/sch_netem.ko",
		"kernel/net/sched/sch_prio.ko",
		"kernel/net/sched/cls_u32.ko",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("load order (-want +got):\n%s", d)
	}
}

func TestResolveCompressedAndDashedNames(t *testing.T) {
	idx, err := rxelink.ReadModuleIndex(writeDep(t, "kernel/a/ib-core.ko.xz:\nkernel/b/rdma_rxe.ko.xz: kernel/a/ib-core.ko.xz\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := idx.Resolve("rdma-rxe")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"kernel/a/ib-core.ko.xz", "kernel/b/rdma_rxe.ko.xz"}, got); d != "" {
		t.Fatal(d)
	}
}

func TestResolveMissingModule(t *testing.T) {
	idx, err := rxelink.ReadModuleIndex(writeDep(t, "kernel/b/rdma_rxe.ko: kernel/a/ib_core.ko\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.Resolve("rdma_rxe"); err == nil {
		t.Fatal("a dependency missing from modules.dep was not reported")
	}
	if _, err := idx.Resolve("nosuch"); err == nil {
		t.Fatal("an unknown module was not reported")
	}
}

func TestReadModuleIndexWithoutDepmod(t *testing.T) {
	if _, err := rxelink.ReadModuleIndex(t.TempDir()); err == nil {
		t.Fatal("a tree without modules.dep was accepted")
	}
}

func TestResolveSkipsBuiltinModules(t *testing.T) {
	dir := writeDep(t, "kernel/d/virtio_console.ko: kernel/d/virtio.ko\n")
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/d/virtio.ko\nkernel/d/virtio_pci.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := rxelink.ReadModuleIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := idx.Resolve("virtio_pci", "virtio_console")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"kernel/d/virtio_console.ko"}, got); d != "" {
		t.Fatalf("built-in modules are not skipped (-want +got):\n%s", d)
	}
}
