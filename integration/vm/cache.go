package vm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Environment variables that point the harness elsewhere.
const (
	EnvCache   = "RXEVM_CACHE"   // cache directory (default <module root>/.cache/rxevm)
	EnvKernel  = "RXEVM_KERNEL"  // a bzImage/vmlinuz to boot instead of Debian's
	EnvModules = "RXEVM_MODULES" // its lib/modules/<version> directory (with modules.dep)
	EnvSuite   = "RXEVM_SUITE"   // the Debian suite whose kernel boots (default DefaultSuite)
)

// PeerPackages are the Debian packages whose programs the image carries as
// real peers, with the libraries they load that ldd cannot see or that a
// fresh machine lacks.
var PeerPackages = []string{
	"ibverbs-utils", "ibverbs-providers", "libibverbs1", "librdmacm1", "rdmacm-utils",
	"perftest", "libibumad3", "libpci3", "libnl-3-200", "libnl-route-3-200",
	"strace", "libunwind8",
}

// Kernel is a kernel image and its modules.
type Kernel struct {
	Image   string // vmlinuz
	Modules string // lib/modules/<version>
}

// Cache is the harness's directory of downloaded and unpacked packages.
type Cache struct {
	Dir   string
	Suite string    // Debian suite of the kernel; "" or DefaultSuite is the machine's own
	Log   io.Writer // progress; never stdout, which carries test output
}

// DefaultCache returns the cache named by RXEVM_CACHE, or .cache/rxevm under
// the module root, for the kernel of the suite named by RXEVM_SUITE.
func DefaultCache(log io.Writer) (*Cache, error) {
	dir := os.Getenv(EnvCache)
	if dir == "" {
		root, err := ModuleRoot()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(root, ".cache", "rxevm")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return &Cache{Dir: abs, Suite: os.Getenv(EnvSuite), Log: log}, os.MkdirAll(abs, 0o755)
}

// ModuleRoot walks up from the working directory to the go.mod of this module.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/pureverbs/pureverbs\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("rxevm: not inside the pureverbs module (set " + EnvCache + ")")
		}
		dir = parent
	}
}

func (c *Cache) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	// CI has no terminal for debconf to ask on.
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("rxevm: %s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// EnsureHostTools installs qemu and kmod with apt-get when they are missing,
// refreshing the package lists once if the first attempt fails.
func (c *Cache) EnsureHostTools() error {
	var missing []string
	for tool, pkg := range map[string]string{"qemu-system-x86_64": "qemu-system-x86", "depmod": "kmod"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	fmt.Fprintf(c.Log, "rxevm: installing %s\n", strings.Join(missing, " "))
	if _, err := c.run("apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...); err == nil {
		return nil
	}
	if _, err := c.run("apt-get", "update"); err != nil {
		return err
	}
	_, err := c.run("apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
	return err
}

// kernelPackage asks apt, with the suite's options, which linux-image
// package linux-image-amd64 pulls in.
func (c *Cache) kernelPackage(apt []string) (string, error) {
	for attempt := 0; attempt < 2; attempt++ {
		out, err := c.run("apt-cache", append(apt, "depends", "linux-image-amd64")...)
		if err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
					return f[1], nil
				}
			}
		}
		if attempt == 0 {
			if _, err := c.run("apt-get", append(apt, "update")...); err != nil {
				return "", err
			}
		}
	}
	return "", errors.New("rxevm: apt-cache names no kernel package for linux-image-amd64")
}

// unpack downloads pkgs with apt-get download (given the apt options) and
// extracts them into dir, once: a complete marker makes later calls free.
func (c *Cache) unpack(dir string, apt []string, pkgs ...string) error {
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	debs := filepath.Join(c.Dir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(c.Log, "rxevm: downloading %s\n", strings.Join(pkgs, " "))
	download := append(append(slices.Clip(apt), "download"), pkgs...)
	cmd := exec.Command("apt-get", download...)
	cmd.Dir = debs
	if out, err := cmd.CombinedOutput(); err != nil {
		if _, uerr := c.run("apt-get", append(apt, "update")...); uerr != nil {
			return uerr
		}
		cmd = exec.Command("apt-get", download...)
		cmd.Dir = debs
		if out2, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("rxevm: apt-get download: %w\n%s%s", err, out, out2)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range pkgs {
		matches, _ := filepath.Glob(filepath.Join(debs, p+"_*.deb"))
		if len(matches) == 0 {
			return fmt.Errorf("rxevm: apt-get download left no %s_*.deb in %s", p, debs)
		}
		for _, m := range matches {
			if _, err := c.run("dpkg", "-x", m, dir); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(done, nil, 0o644)
}

// Kernel returns the kernel to boot: RXEVM_KERNEL/RXEVM_MODULES when set,
// otherwise the current linux-image package of the cache's suite, fetched
// and unpacked into the cache (no install on the host) with modules.dep
// written by depmod. Each package has its own directory, so the kernels of
// several suites coexist.
func (c *Cache) Kernel() (Kernel, error) {
	if img := os.Getenv(EnvKernel); img != "" {
		mods := os.Getenv(EnvModules)
		if mods == "" {
			return Kernel{}, fmt.Errorf("rxevm: %s is set but %s is not", EnvKernel, EnvModules)
		}
		if _, err := os.Stat(filepath.Join(mods, "modules.dep")); err != nil {
			return Kernel{}, fmt.Errorf("rxevm: %s: no modules.dep (run depmod -b on its tree)", mods)
		}
		return Kernel{Image: img, Modules: mods}, nil
	}
	apt, err := c.aptOptions()
	if err != nil {
		return Kernel{}, err
	}
	pkg, err := c.kernelPackage(apt)
	if err != nil {
		return Kernel{}, err
	}
	dir := filepath.Join(c.Dir, "kernel", pkg)
	if err := c.unpack(dir, apt, pkg); err != nil {
		return Kernel{}, err
	}
	imgs, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(imgs) != 1 {
		return Kernel{}, fmt.Errorf("rxevm: %s holds %d kernel images, want 1", pkg, len(imgs))
	}
	version := strings.TrimPrefix(filepath.Base(imgs[0]), "vmlinuz-")
	base := dir
	mods := filepath.Join(dir, "lib", "modules", version)
	if _, err := os.Stat(mods); err != nil { // newer packages ship under usr/
		base = filepath.Join(dir, "usr")
		mods = filepath.Join(base, "lib", "modules", version)
	}
	if _, err := os.Stat(filepath.Join(mods, "modules.dep")); err != nil {
		if _, err := c.run("depmod", "-b", base, version); err != nil {
			return Kernel{}, err
		}
	}
	return Kernel{Image: imgs[0], Modules: mods}, nil
}

// Peers returns the directory holding rdma-core's C tools, unpacked. They
// come from the machine's own suite whatever the kernel's: the uverbs ABI
// they speak is kept stable across kernels.
func (c *Cache) Peers() (string, error) {
	dir := filepath.Join(c.Dir, "peers")
	return dir, c.unpack(dir, nil, PeerPackages...)
}
