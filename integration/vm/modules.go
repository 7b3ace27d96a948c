package vm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RxeModules are the modules a run asks for by name; their dependencies come
// from modules.dep.
//
// crc32_generic is not in rdma_rxe's modules.dep line: rxe asks the crypto
// API for "crc32" at run time (rxe_icrc), a request modules.dep cannot see.
// Without it, adding an rxe link fails with ENOENT.
//
// rdma_ucm gives /dev/infiniband/rdma_cm (RDMA CM, with rdma_cm, ib_cm and
// iw_cm beneath it); sch_netem lets tests put loss, delay and corruption on
// the veth pair.
var RxeModules = []string{"crc32_generic", "rdma_rxe", "veth", "rdma_ucm", "sch_netem"}

// NICModules drive the virtio NIC of a two-VM run.
var NICModules = []string{"virtio_pci", "virtio_net"}

// ModuleIndex is a kernel's modules.dep, keyed by module name.
type ModuleIndex struct {
	dir     string              // the lib/modules/<version> directory
	path    map[string]string   // name -> path relative to dir
	deps    map[string][]string // name -> names it depends on
	builtin map[string]bool     // names in modules.builtin: nothing to load
}

// moduleName turns "kernel/net/ipv4/udp_tunnel.ko.xz" into "udp_tunnel";
// the kernel treats '-' and '_' in module names alike.
func moduleName(p string) string {
	base := filepath.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// LoadModuleIndex reads dir/modules.dep and, when present, modules.builtin
// (modules compiled into the kernel, which Resolve skips: a driver that is a
// module on one architecture's kernel may be built in on another's).
func LoadModuleIndex(dir string) (*ModuleIndex, error) {
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("rxevm: %w (run depmod -b on the kernel tree)", err)
	}
	defer f.Close()
	idx := &ModuleIndex{dir: dir, path: map[string]string{}, deps: map[string][]string{}, builtin: map[string]bool{}}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for _, line := range strings.Fields(string(b)) {
			idx.builtin[moduleName(line)] = true
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mod, deps, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		name := moduleName(mod)
		idx.path[name] = mod
		for _, d := range strings.Fields(deps) {
			idx.deps[name] = append(idx.deps[name], moduleName(d))
		}
	}
	return idx, sc.Err()
}

// Resolve returns the module files (relative to the modules directory) that
// loading names needs, each after everything it depends on.
func (idx *ModuleIndex) Resolve(names ...string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, from string) error
	visit = func(n, from string) error {
		n = strings.ReplaceAll(n, "-", "_")
		switch state[n] {
		case 1:
			return fmt.Errorf("rxevm: module dependency cycle at %s", n)
		case 2:
			return nil
		}
		p, ok := idx.path[n]
		if !ok && idx.builtin[n] {
			state[n] = 2
			return nil
		}
		if !ok {
			if from != "" {
				return fmt.Errorf("rxevm: module %s (needed by %s) is not in %s/modules.dep", n, from, idx.dir)
			}
			return fmt.Errorf("rxevm: module %s is not in %s/modules.dep (built in, or missing from this kernel?)", n, idx.dir)
		}
		state[n] = 1
		for _, d := range idx.deps[n] {
			if err := visit(d, n); err != nil {
				return err
			}
		}
		state[n] = 2
		order = append(order, p)
		return nil
	}
	for _, n := range names {
		if err := visit(n, ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}
