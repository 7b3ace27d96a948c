package vm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Environment variables that point the harness elsewhere.
const (
	EnvCache   = "RXEVM_CACHE"   // cache directory (default DefaultCacheDir)
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

// ForeignPeerPackages are added for a guest architecture other than the
// host's, or a suite other than the machine's: the C runtime and the
// libraries the host would otherwise supply.
var ForeignPeerPackages = []string{
	"libc6", "libgcc-s1", "liblzma5", "libudev1", "zlib1g", "libcap2",
}

// Kernel is a kernel image and its modules.
type Kernel struct {
	Image   string // vmlinuz
	Modules string // lib/modules/<version>
}

// Cache is the harness's directory of downloaded and unpacked packages. It
// may be shared by several runs at once: everything that changes it happens
// under Lock, and unpacked trees appear by an atomic rename, complete or not
// at all.
type Cache struct {
	Dir   string
	Suite string    // Debian suite of the kernel; "" or DefaultSuite is the machine's own
	Arch  Arch      // guest architecture; the zero value is the host's
	Log   io.Writer // progress; never stdout, which carries test output

	// exec runs a program and returns its stdout; nil means the real one.
	// Tests replace it to watch what apt is asked.
	exec func(dir, name string, args ...string) ([]byte, error)
}

// DefaultCacheDir is the cache when RXEVM_CACHE is unset: pureverbs/rxevm
// under the user's cache directory ($XDG_CACHE_HOME or ~/.cache), shared by
// every project that runs rxevm.
func DefaultCacheDir() (string, error) {
	if dir := os.Getenv(EnvCache); dir != "" {
		return filepath.Abs(dir)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("rxevm: no cache directory (set %s): %w", EnvCache, err)
	}
	return filepath.Join(base, "pureverbs", "rxevm"), nil
}

// DefaultCache returns the cache in DefaultCacheDir for the kernel of the
// suite named by RXEVM_SUITE, for guests of architecture arch.
func DefaultCache(arch Arch, log io.Writer) (*Cache, error) {
	suite := os.Getenv(EnvSuite)
	if err := checkSuite(suite); err != nil {
		return nil, err
	}
	dir, err := DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("rxevm: cache: %w", err)
	}
	return &Cache{Dir: dir, Suite: suite, Arch: arch, Log: log}, nil
}

func (c *Cache) arch() Arch {
	if c.Arch.GOARCH == "" {
		if a, err := HostArch(); err == nil {
			return a
		}
	}
	return c.Arch
}

func (c *Cache) suite() string {
	if c.Suite == "" {
		return DefaultSuite
	}
	return c.Suite
}

// aptLockWait is how long run waits for apt's own lock, which other
// programs on the machine (another project's rxevm, unattended upgrades)
// may hold: the machine's lists are shared, whatever our cache lock says.
// aptLockPause is the pause between attempts.
var (
	aptLockWait  = 3 * time.Minute
	aptLockPause = 3 * time.Second
)

// run runs name in dir ("" for the current directory) and returns its
// stdout; the error carries stderr. apt-get is run again while it fails
// because another process holds apt's lock.
func (c *Cache) run(dir, name string, args ...string) ([]byte, error) {
	once := c.runOnce
	if c.exec != nil {
		once = c.exec
	}
	deadline := time.Now().Add(aptLockWait)
	for {
		out, err := once(dir, name, args...)
		if err == nil || name != "apt-get" || !strings.Contains(err.Error(), "Could not get lock") || time.Now().After(deadline) {
			return out, err
		}
		if c.Log != nil {
			fmt.Fprintln(c.Log, "rxevm: apt is locked by another process; waiting")
		}
		time.Sleep(aptLockPause)
	}
}

func (c *Cache) runOnce(dir, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
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

// EnsureHostTools installs the guest architecture's QEMU and kmod with
// apt-get when they are missing, refreshing the package lists once if the
// first attempt fails.
func (c *Cache) EnsureHostTools() error {
	a := c.arch()
	var missing []string
	for tool, pkg := range map[string]string{a.QEMU: a.QEMUPkg, "depmod": "kmod"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return c.aptInstall(missing)
}

// aptInstall installs pkgs with apt-get under the cache's lock, refreshing
// the package lists once if the first attempt fails.
func (c *Cache) aptInstall(pkgs []string) error {
	unlock, err := c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	fmt.Fprintf(c.Log, "rxevm: installing %s\n", strings.Join(pkgs, " "))
	install := append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)
	if _, err := c.run("", "apt-get", install...); err == nil {
		return nil
	}
	if _, err := c.run("", "apt-get", "update"); err != nil {
		return err
	}
	_, err = c.run("", "apt-get", install...)
	return err
}

// Kernel returns the kernel to boot: RXEVM_KERNEL/RXEVM_MODULES when set,
// otherwise the linux-image package chosen for the cache's suite and
// architecture (see KernelPackage), fetched and unpacked into the cache (no
// install on the host) with modules.dep written by depmod. Each package has
// its own directory, so the kernels of several suites and architectures
// coexist.
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
	unlock, err := c.Lock()
	if err != nil {
		return Kernel{}, err
	}
	defer unlock()
	apt, err := c.aptOptions()
	if err != nil {
		return Kernel{}, err
	}
	pkg, err := c.KernelPackage(apt)
	if err != nil {
		return Kernel{}, err
	}
	dir := filepath.Join(c.Dir, "kernel", pkg)
	if err := c.unpack(dir, apt, []string{pkg}, c.depmod); err != nil {
		return Kernel{}, err
	}
	return kernelIn(dir)
}

// kernelIn finds the image and the modules directory in an unpacked
// linux-image package.
func kernelIn(dir string) (Kernel, error) {
	imgs, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(imgs) != 1 {
		return Kernel{}, fmt.Errorf("rxevm: %s holds %d kernel images, want 1", dir, len(imgs))
	}
	version := strings.TrimPrefix(filepath.Base(imgs[0]), "vmlinuz-")
	mods := filepath.Join(dir, "lib", "modules", version)
	if _, err := os.Stat(mods); err != nil { // newer packages ship under usr/
		mods = filepath.Join(dir, "usr", "lib", "modules", version)
	}
	if _, err := os.Stat(filepath.Join(mods, "modules.dep")); err != nil {
		return Kernel{}, fmt.Errorf("rxevm: %s: no modules.dep: %w", mods, err)
	}
	return Kernel{Image: imgs[0], Modules: mods}, nil
}

// depmod writes modules.dep into a freshly unpacked kernel package (the
// package carries none).
func (c *Cache) depmod(dir string) error {
	imgs, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(imgs) != 1 {
		return fmt.Errorf("rxevm: the kernel package holds %d images, want 1", len(imgs))
	}
	version := strings.TrimPrefix(filepath.Base(imgs[0]), "vmlinuz-")
	base := dir
	if _, err := os.Stat(filepath.Join(dir, "lib", "modules", version)); err != nil {
		base = filepath.Join(dir, "usr")
	}
	_, err := c.run("", "depmod", "-b", base, version)
	return err
}

// Peers returns the directory holding rdma-core's C tools, unpacked. They
// come from the kernel's suite, so each Debian release is tested against its
// own rdma-core (bookworm's 44 on 6.1, trixie's 56 on 6.12): the machine's
// own packages for DefaultSuite on the host's architecture, otherwise the
// suite's and architecture's packages with that release's C runtime
// (ForeignPeerPackages), so the tools never meet a C library older than the
// one they were built for. Each suite and architecture has its own
// directory: peers, peers-<arch>, peers-<suite>, peers-<arch>-<suite>.
func (c *Cache) Peers() (string, error) {
	unlock, err := c.Lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	a := c.arch()
	suite := c.suite()
	pkgs := PeerPackagesFor(suite)
	if !a.Foreign() && suite == DefaultSuite {
		dir := filepath.Join(c.Dir, "peers")
		return dir, c.unpack(dir, nil, pkgs, nil)
	}
	apt, err := (&Cache{Dir: c.Dir, Suite: c.Suite, Arch: a, Log: c.Log, exec: c.exec}).aptOptions()
	if err != nil {
		return "", err
	}
	if err := c.ensureLists(apt); err != nil {
		return "", err
	}
	name := "peers"
	if a.Foreign() {
		name += "-" + a.Deb
	}
	if suite != DefaultSuite {
		name += "-" + suite
	}
	dir := filepath.Join(c.Dir, name)
	return dir, c.unpack(dir, apt, append(pkgs, ForeignPeerPackages...), nil)
}

// peerRenames are PeerPackages' names in suites that renamed them (trixie's
// 64-bit time_t transition gave librdmacm a new package name).
var peerRenames = map[string]map[string]string{
	"trixie": {"librdmacm1": "librdmacm1t64"},
}

// PeerPackagesFor returns PeerPackages as suite names them, in a new slice.
func PeerPackagesFor(suite string) []string {
	out := make([]string, len(PeerPackages))
	for i, p := range PeerPackages {
		out[i] = p
		if r, ok := peerRenames[suite][p]; ok {
			out[i] = r
		}
	}
	return out
}

// ensureLists runs apt-get update for a private apt state that has never
// been fetched (the machine's own lists, apt == nil, are left alone).
func (c *Cache) ensureLists(apt []string) error {
	if apt == nil {
		return nil
	}
	for _, o := range apt {
		if dir, ok := strings.CutPrefix(o, "-oDir::State::Lists="); ok {
			if m, _ := filepath.Glob(filepath.Join(dir, "*_Packages*")); len(m) > 0 {
				return nil
			}
		}
	}
	_, err := c.run("", "apt-get", append(apt, "update")...)
	return err
}
