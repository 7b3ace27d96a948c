package rxelink

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeSysfs points the package at an empty sysfs tree and returns it.
func fakeSysfs(t *testing.T) string {
	t.Helper()
	saved := sysfs
	t.Cleanup(func() { sysfs = saved })
	sysfs = t.TempDir()
	return sysfs
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// modulesTree writes a modules directory shaped like Debian 13's: xz files,
// a dependency chain, a built-in module on a dependency line.
func modulesTree(t *testing.T) string {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "modules.dep"), strings.Join([]string{
		"kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: kernel/drivers/infiniband/core/ib_uverbs.ko.xz kernel/drivers/infiniband/core/ib_core.ko.xz kernel/net/ipv6/ip6_udp_tunnel.ko.xz kernel/net/ipv4/udp_tunnel.ko.xz",
		"kernel/drivers/infiniband/core/ib_uverbs.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz",
		"kernel/drivers/infiniband/core/ib_core.ko.xz:",
		"kernel/net/ipv6/ip6_udp_tunnel.ko.xz:",
		"kernel/net/ipv4/udp_tunnel.ko.xz:",
		"kernel/crypto/crc32_generic.ko.xz:",
		"kernel/net/sched/sch_netem.ko:",
		"kernel/drivers/net/veth.ko.xz: kernel/net/core/page-pool.ko.xz",
		"",
	}, "\n"))
	write(t, filepath.Join(dir, "modules.builtin"), "kernel/net/core/page-pool.ko\n")
	for _, f := range []string{"drivers/infiniband/sw/rxe/rdma_rxe.ko.xz", "drivers/infiniband/core/ib_uverbs.ko.xz",
		"drivers/infiniband/core/ib_core.ko.xz", "net/ipv6/ip6_udp_tunnel.ko.xz", "net/ipv4/udp_tunnel.ko.xz",
		"crypto/crc32_generic.ko.xz", "net/sched/sch_netem.ko", "drivers/net/veth.ko.xz"} {
		write(t, filepath.Join(dir, "kernel", f), "module "+f)
	}
	return dir
}

func TestResolveOrdersDependenciesFirst(t *testing.T) {
	idx, err := ReadModuleIndex(modulesTree(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := idx.Resolve("rdma_rxe", "veth")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kernel/drivers/infiniband/core/ib_core.ko.xz",
		"kernel/drivers/infiniband/core/ib_uverbs.ko.xz",
		"kernel/net/ipv6/ip6_udp_tunnel.ko.xz",
		"kernel/net/ipv4/udp_tunnel.ko.xz",
		"kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz",
		"kernel/drivers/net/veth.ko.xz", // page_pool is built in: not loaded
	}
	if !slices.Equal(got, want) {
		t.Errorf("Resolve(rdma_rxe, veth) =\n%q\nwant\n%q", got, want)
	}
	if !idx.Has("page-pool") || !idx.Has("sch_netem") || idx.Has("siw") {
		t.Errorf("Has: page-pool %v sch_netem %v siw %v; want true true false", idx.Has("page-pool"), idx.Has("sch_netem"), idx.Has("siw"))
	}
	if _, err := idx.Resolve("siw"); err == nil || !strings.Contains(err.Error(), "siw is not in") {
		t.Errorf("Resolve(siw) = %v; want an error naming siw", err)
	}
}

// Load skips what /sys/module shows loaded, passes the compressed flag for
// .ko.xz and not for .ko, and stops at the first failure naming the file.
func TestLoadSkipsLoadedAndFlagsCompressed(t *testing.T) {
	dir := modulesTree(t)
	sys := fakeSysfs(t)
	if err := os.MkdirAll(filepath.Join(sys, "module/ib_core"), 0o755); err != nil {
		t.Fatal(err)
	}
	type call struct {
		file  string
		flags int
	}
	var calls []call
	saved := finitModule
	t.Cleanup(func() { finitModule = saved })
	failOn := ""
	finitModule = func(fd int, params string, flags int) error {
		target, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		calls = append(calls, call{strings.TrimPrefix(target, dir+"/"), flags})
		if failOn != "" && strings.HasSuffix(target, failOn) {
			return unix.ENOEXEC
		}
		if strings.HasSuffix(target, "ib_uverbs.ko.xz") {
			return unix.EEXIST // loaded meanwhile by someone else: fine
		}
		return nil
	}
	idx, err := ReadModuleIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := idx.Load("rdma_rxe", "sch_netem")
	if err != nil {
		t.Fatal(err)
	}
	x := unix.MODULE_INIT_COMPRESSED_FILE
	want := []call{
		{"kernel/drivers/infiniband/core/ib_uverbs.ko.xz", x},
		{"kernel/net/ipv6/ip6_udp_tunnel.ko.xz", x},
		{"kernel/net/ipv4/udp_tunnel.ko.xz", x},
		{"kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz", x},
		{"kernel/net/sched/sch_netem.ko", 0},
	}
	if !slices.Equal(calls, want) {
		t.Errorf("finit_module calls\n%v\nwant\n%v", calls, want)
	}
	if len(loaded) != 5 {
		t.Errorf("Load reported %q", loaded)
	}
	calls, failOn = nil, "udp_tunnel.ko.xz"
	_, err = idx.Load("rdma_rxe")
	if !errors.Is(err, unix.ENOEXEC) || !strings.Contains(err.Error(), "ip6_udp_tunnel.ko.xz") {
		t.Errorf("a failing finit_module: %v; want ENOEXEC naming ip6_udp_tunnel.ko.xz", err)
	}
	if len(calls) != 2 {
		t.Errorf("Load went on after a failure: %v", calls)
	}
}
