package vm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
)

// Image describes one initramfs: the guest /init, the plan, the kernel
// modules and every program the plan may run.
type Image struct {
	Init    string            // the static guest /init (rxevm built for the guest)
	Arch    Arch              // the guest's architecture; the zero value is the host's
	Plan    *Plan             // Plan.Modules is filled in by Build
	Kernel  Kernel            // modules come from Kernel.Modules
	Peers   string            // unpacked rdma-core packages; "" leaves the C tools out
	Files   map[string]string // guest path -> host file (test binaries, Go tools)
	Modules []string          // module names to load, dependencies resolved from modules.dep
	// Unloaded are names among Modules the guest is given (with what they
	// need) but does not load unless another module needs them: for a test
	// of loading them itself, through the modules.dep and modules.builtin
	// every image carries.
	Unloaded []string
}

// Build writes the initramfs (uncompressed cpio: QEMU hands it to the kernel
// as it is, and skipping gzip saves a second on every boot) to path.
func (im *Image) Build(path string) error {
	a := NewArchive()
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/run", "/etc", "/root"} {
		a.Dir(d)
	}
	if err := a.File("/init", im.Init); err != nil {
		return err
	}
	idx, err := rxelink.ReadModuleIndex(im.Kernel.Modules)
	if err != nil {
		return err
	}
	rel, err := idx.Resolve(im.Modules...)
	if err != nil {
		return err
	}
	var load []string
	for _, m := range im.Modules {
		if !slices.Contains(im.Unloaded, m) {
			load = append(load, m)
		}
	}
	loaded, err := idx.Resolve(load...)
	if err != nil {
		return err
	}
	version := filepath.Base(im.Kernel.Modules)
	for _, index := range []string{"modules.dep", "modules.builtin"} {
		if _, err := os.Stat(filepath.Join(im.Kernel.Modules, index)); err == nil {
			if err := a.File(filepath.Join("/lib/modules", version, index), filepath.Join(im.Kernel.Modules, index)); err != nil {
				return err
			}
		}
	}
	im.Plan.Modules = im.Plan.Modules[:0]
	for _, r := range rel {
		guest := filepath.Join("/lib/modules", version, r)
		if err := a.File(guest, filepath.Join(im.Kernel.Modules, r)); err != nil {
			return err
		}
		if slices.Contains(loaded, r) {
			im.Plan.Modules = append(im.Plan.Modules, guest)
		}
	}
	if im.Peers != "" {
		arch := im.Arch
		if arch.GOARCH == "" {
			if arch, err = HostArch(); err != nil {
				return err
			}
		}
		if err := addPeers(a, im.Peers, arch); err != nil {
			return err
		}
	}
	guests := make([]string, 0, len(im.Files))
	for g := range im.Files {
		guests = append(guests, g)
	}
	sort.Strings(guests)
	for _, g := range guests {
		if err := a.File(g, im.Files[g]); err != nil {
			return err
		}
	}
	plan, err := im.Plan.Encode()
	if err != nil {
		return err
	}
	a.Bytes(PlanPath, plan, 0o644)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := a.WriteTo(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// addPeers copies rdma-core's programs, the librxe provider libibverbs
// dlopens (which ldd cannot see) and every shared library they need: found
// by ldd with the host's C runtime for the machine's own packages, and from
// the ELF files' own DT_NEEDED entries within the unpacked tree for a tree
// that carries its own C runtime (a foreign architecture's, or another
// suite's: the host's ldd cannot load a newer libc).
func addPeers(a *Archive, root string, arch Arch) error {
	multiarch := "usr/lib/" + arch.Triple
	var elfs []string
	bins, _ := filepath.Glob(filepath.Join(root, "usr/bin/*"))
	for _, b := range bins {
		if isELF(b) { // scripts are left out: the image has no shell
			if err := a.File("/usr/bin/"+filepath.Base(b), b); err != nil {
				return err
			}
			elfs = append(elfs, b)
		}
	}
	providers, _ := filepath.Glob(filepath.Join(root, multiarch, "libibverbs/librxe-*.so"))
	if len(providers) == 0 {
		return fmt.Errorf("rxevm: no librxe provider under %s", root)
	}
	for _, p := range providers {
		if err := a.File("/"+multiarch+"/libibverbs/"+filepath.Base(p), p); err != nil {
			return err
		}
		elfs = append(elfs, p)
	}
	if err := a.File("/etc/libibverbs.d/rxe.driver", filepath.Join(root, "etc/libibverbs.d/rxe.driver")); err != nil {
		return err
	}
	// librdmacm's socket preload (LD_PRELOAD=.../rsocket/librspreload.so.1),
	// which puts unmodified socket programs on rsockets.
	preload, _ := filepath.Glob(filepath.Join(root, multiarch, "rsocket/librspreload.so.1"))
	for _, p := range preload {
		if err := a.File("/"+multiarch+"/rsocket/"+filepath.Base(p), p); err != nil {
			return err
		}
		elfs = append(elfs, p)
	}
	if arch.Foreign() || ownRuntime(root, arch) {
		libs, err := neededIn(root, arch.Triple, elfs, []string{"libgcc_s.so.1"})
		if err != nil {
			return err
		}
		for _, l := range libs {
			if !a.Has(l.guest) {
				if err := a.File(l.guest, l.host); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// Loaded with dlopen by libgcc users (rping's pthread_cancel) and not named by ldd.
	extra := []string{"/lib/" + arch.Triple + "/libgcc_s.so.1"}
	libPath := strings.Join([]string{filepath.Join(root, multiarch), filepath.Join(root, "lib", arch.Triple)}, ":")
	for _, e := range elfs {
		libs, err := sharedLibs(e, libPath)
		if err != nil {
			return err
		}
		extra = append(extra, libs...)
	}
	for _, lib := range extra {
		guest := lib
		if r, ok := strings.CutPrefix(lib, root); ok {
			guest = r
		}
		if a.Has(guest) {
			continue
		}
		if err := a.File(guest, lib); err != nil {
			return err
		}
	}
	return nil
}

// ownRuntime reports whether an unpacked tree carries a C library of its
// own (see Cache.Peers).
func ownRuntime(root string, arch Arch) bool {
	for _, d := range []string{"usr/lib/", "lib/"} {
		if _, err := resolveIn(root, d+arch.Triple+"/libc.so.6"); err == nil {
			return true
		}
	}
	return false
}

// sharedLibs runs ldd on an ELF file and returns the libraries it resolves.
func sharedLibs(elf, libPath string) ([]string, error) {
	cmd := exec.Command("ldd", elf)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+libPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if bytes.Contains(stderr.Bytes(), []byte("not a dynamic executable")) {
			return nil, nil // static: nothing to add
		}
		return nil, fmt.Errorf("rxevm: ldd %s: %w: %s", elf, err, stderr.Bytes())
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("rxevm: %s needs %s, which is neither unpacked nor on the host", elf, f[0])
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0]) // the dynamic loader itself
		}
	}
	return libs, nil
}

// isELF reports whether path is a regular file starting with the ELF magic.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == "\x7fELF"
}
