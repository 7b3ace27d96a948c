package rxelink

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// LoadRxe loads rdma_rxe and what it depends on into the running kernel,
// like `modprobe rdma_rxe`, unless it is loaded (or built in) already. It
// loads crc32_generic too when the kernel has it as a module: rdma_rxe's
// modules.dep line cannot name it (rxe asks the crypto API for "crc32" at
// run time), and without it adding a link fails with ENOENT.
func LoadRxe() error {
	if Loaded("rdma_rxe") {
		return nil
	}
	dir, err := ModulesDir()
	if err != nil {
		return err
	}
	idx, err := ReadModuleIndex(dir)
	if err != nil {
		return err
	}
	names := []string{"rdma_rxe"}
	if idx.Has("crc32_generic") {
		names = append([]string{"crc32_generic"}, names...)
	}
	_, err = idx.Load(names...)
	return err
}

// ModulesDir returns the running kernel's module directory:
// /lib/modules/<release>, or /usr/lib/modules/<release> on a system
// without the /lib link.
func ModulesDir() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("rxelink: uname: %w", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	for _, root := range []string{"/lib/modules", "/usr/lib/modules"} {
		d := filepath.Join(root, release)
		if _, err := os.Stat(filepath.Join(d, "modules.dep")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("rxelink: no modules.dep for kernel %s in /lib/modules or /usr/lib/modules: %w", release, os.ErrNotExist)
}

// ModuleIndex is a kernel's modules.dep (and modules.builtin), by module
// name.
type ModuleIndex struct {
	Dir     string              // the modules directory, e.g. /lib/modules/6.1.0-57-amd64
	path    map[string]string   // name -> file, relative to Dir
	deps    map[string][]string // name -> the names it needs
	builtin map[string]bool     // compiled into the kernel: nothing to load
}

// ModuleName turns a module file's path ("kernel/net/ipv4/udp_tunnel.ko.xz")
// into the module's name ("udp_tunnel"); the kernel treats '-' and '_' in
// names alike, and so does this package, which always uses '_'.
func ModuleName(path string) string {
	base := filepath.Base(path)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// ReadModuleIndex reads dir/modules.dep and, when there is one,
// dir/modules.builtin.
func ReadModuleIndex(dir string) (*ModuleIndex, error) {
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("rxelink: %w (depmod writes it)", err)
	}
	defer f.Close()
	idx := &ModuleIndex{Dir: dir, path: map[string]string{}, deps: map[string][]string{}, builtin: map[string]bool{}}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for _, line := range strings.Fields(string(b)) {
			idx.builtin[ModuleName(line)] = true
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mod, deps, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		name := ModuleName(mod)
		idx.path[name] = mod
		for _, d := range strings.Fields(deps) {
			idx.deps[name] = append(idx.deps[name], ModuleName(d))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rxelink: read %s: %w", f.Name(), err)
	}
	return idx, nil
}

// Has reports whether the kernel has module name, as a file or built in.
func (idx *ModuleIndex) Has(name string) bool {
	name = strings.ReplaceAll(name, "-", "_")
	_, ok := idx.path[name]
	return ok || idx.builtin[name]
}

// Resolve returns the module files (relative to Dir) that loading names
// needs, each after every module it depends on; built-in modules are left
// out.
func (idx *ModuleIndex) Resolve(names ...string) ([]string, error) {
	var order []string
	const visiting, done = 1, 2
	state := map[string]int{}
	var visit func(n, from string) error
	visit = func(n, from string) error {
		n = strings.ReplaceAll(n, "-", "_")
		switch state[n] {
		case visiting:
			return fmt.Errorf("rxelink: module dependency cycle at %s", n)
		case done:
			return nil
		}
		p, ok := idx.path[n]
		if !ok && idx.builtin[n] {
			state[n] = done
			return nil
		}
		if !ok {
			if from != "" {
				return fmt.Errorf("rxelink: module %s (needed by %s) is not in %s/modules.dep", n, from, idx.Dir)
			}
			return fmt.Errorf("rxelink: module %s is not in %s/modules.dep (not built for this kernel?)", n, idx.Dir)
		}
		state[n] = visiting
		for _, d := range idx.deps[n] {
			if err := visit(d, n); err != nil {
				return err
			}
		}
		state[n] = done
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

// Load loads names and their dependencies, skipping every module the
// kernel has already (/sys/module/NAME), and returns the files it loaded.
func (idx *ModuleIndex) Load(names ...string) ([]string, error) {
	files, err := idx.Resolve(names...)
	if err != nil {
		return nil, err
	}
	var loaded []string
	for _, f := range files {
		if Loaded(ModuleName(f)) {
			continue
		}
		if err := LoadModuleFile(filepath.Join(idx.Dir, f)); err != nil {
			return loaded, err
		}
		loaded = append(loaded, f)
	}
	return loaded, nil
}

// Loaded reports whether the running kernel has module name (loaded, or
// built in with a /sys/module entry).
func Loaded(name string) bool {
	_, err := os.Stat(filepath.Join(sysfs, "module", strings.ReplaceAll(name, "-", "_")))
	return err == nil
}

// finitModule is the system call LoadModuleFile makes; tests replace it.
var finitModule = unix.FinitModule

// LoadModuleFile loads one module file with finit_module(2), without
// parameters. A compressed file (.ko.xz, .ko.zst, .ko.gz) is handed over
// as it is with MODULE_INIT_COMPRESSED_FILE, for the kernel to unpack
// (CONFIG_MODULE_DECOMPRESS). A module that is loaded already is not an
// error.
func LoadModuleFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("rxelink: load module: %w", err)
	}
	defer f.Close()
	flags := 0
	if !strings.HasSuffix(path, ".ko") {
		flags |= unix.MODULE_INIT_COMPRESSED_FILE
	}
	err = finitModule(int(f.Fd()), "", flags)
	switch {
	case err == nil, errors.Is(err, unix.EEXIST):
		return nil
	case flags != 0 && errors.Is(err, unix.EINVAL):
		return fmt.Errorf("rxelink: finit_module %s (compressed): %w (a kernel without CONFIG_MODULE_DECOMPRESS needs it unpacked)", path, err)
	}
	return fmt.Errorf("rxelink: finit_module %s: %w", path, err)
}
