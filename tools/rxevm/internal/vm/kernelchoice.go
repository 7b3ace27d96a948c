package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Environment variables that change which kernel package boots.
const (
	// EnvKernelPackage boots the named linux-image package (e.g.
	// linux-image-6.1.0-57-amd64) for this run, whatever the cache recorded.
	EnvKernelPackage = "RXEVM_KERNEL_PACKAGE"
	// EnvKernelRefresh=1 refreshes the apt lists, resolves the current
	// kernel package again and records it as the new choice.
	EnvKernelRefresh = "RXEVM_KERNEL_REFRESH"
)

// choiceFile is where the cache records the kernel package chosen for its
// suite and architecture.
func (c *Cache) choiceFile() string {
	return filepath.Join(c.Dir, "kernel", "choice-"+c.suite()+"-"+c.arch().Deb)
}

// KernelPackage returns the linux-image package to boot, resolved once per
// cache, suite and architecture: the first run refreshes the apt lists,
// asks apt which package the architecture's meta package depends on and
// records the answer; every later run (every suite of a make test, every
// project sharing the cache) boots that same package without asking apt,
// until the choice file is removed, RXEVM_KERNEL_REFRESH=1 asks for a new
// resolution or RXEVM_KERNEL_PACKAGE names another package for one run.
// The caller holds the lock.
func (c *Cache) KernelPackage(apt []string) (string, error) {
	if pkg := os.Getenv(EnvKernelPackage); pkg != "" {
		if !validPackageName(pkg) {
			return "", fmt.Errorf("rxevm: %s=%q is not a package name", EnvKernelPackage, pkg)
		}
		return pkg, nil
	}
	file := c.choiceFile()
	if os.Getenv(EnvKernelRefresh) != "1" {
		b, err := os.ReadFile(file)
		if pkg := strings.TrimSpace(string(b)); err == nil && validPackageName(pkg) {
			return pkg, nil
		}
	}
	// No choice yet: the lists may be months old on a fresh machine, and a
	// stale answer would differ from the one after the next update.
	if _, err := c.run("", "apt-get", append(slices.Clip(apt), "update")...); err != nil {
		return "", err
	}
	pkg, err := c.resolveKernel(apt)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return "", fmt.Errorf("rxevm: %w", err)
	}
	if err := writeFileAtomic(file, []byte(pkg+"\n")); err != nil {
		return "", err
	}
	fmt.Fprintf(c.Log, "rxevm: kernel package %s recorded in %s\n", pkg, file)
	return pkg, nil
}

// resolveKernel asks apt which linux-image package the architecture's meta
// package depends on.
func (c *Cache) resolveKernel(apt []string) (string, error) {
	meta := c.arch().KernelMeta
	out, err := c.run("", "apt-cache", append(slices.Clip(apt), "depends", meta)...)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			return f[1], nil
		}
	}
	return "", errors.New("rxevm: apt-cache names no kernel package for " + meta)
}

// validPackageName accepts Debian package names only, so a damaged choice
// file or variable never reaches apt as an option.
func validPackageName(s string) bool {
	if len(s) < 2 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
