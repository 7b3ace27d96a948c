package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// completeMarker is the last file written into an unpacked tree; a tree
// without it is never used.
const completeMarker = ".complete"

// unpack makes dir hold pkgs, extracted with dpkg -x, once: later calls
// find its complete marker and return at once. The caller holds the lock.
//
// The packages are downloaded with apt-get download (given the apt
// options) into a fresh temporary directory, each checked with dpkg-deb
// --info, extracted into a temporary tree beside dir, finished by post
// (e.g. depmod) and marked complete; only then is the tree renamed to dir.
// A run killed at any point leaves temporary directories, which the next
// one removes and redoes, never trusts.
func (c *Cache) unpack(dir string, apt []string, pkgs []string, post func(tree string) error) error {
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("rxevm: %w", err)
	}
	removeStale(parent, filepath.Base(dir))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("rxevm: %w", err)
	}
	defer os.RemoveAll(tmp)
	debs, tree := filepath.Join(tmp, "debs"), filepath.Join(tmp, "tree")
	for _, d := range []string{debs, tree} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("rxevm: %w", err)
		}
	}
	files, err := c.download(debs, apt, pkgs)
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, err := c.run("", "dpkg", "-x", f, tree); err != nil {
			return err
		}
	}
	if post != nil {
		if err := post(tree); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tree, completeMarker), nil, 0o644); err != nil {
		return fmt.Errorf("rxevm: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil { // an incomplete tree from an older rxevm
		return fmt.Errorf("rxevm: %w", err)
	}
	if err := os.Rename(tree, dir); err != nil {
		return fmt.Errorf("rxevm: %w", err)
	}
	return nil
}

// removeStale removes the temporary trees interrupted runs left beside
// name. Only the lock holder calls it, so none is in use.
func removeStale(parent, name string) {
	stale, _ := filepath.Glob(filepath.Join(parent, "."+name+".tmp-*"))
	for _, s := range stale {
		os.RemoveAll(s)
	}
}

// download fetches pkgs into dir with apt-get download (refreshing the
// lists once when that fails) and returns the .deb files, each verified
// with dpkg-deb --info; apt itself checks them against the index's hashes.
func (c *Cache) download(dir string, apt []string, pkgs []string) ([]string, error) {
	fmt.Fprintf(c.Log, "rxevm: downloading %s\n", strings.Join(pkgs, " "))
	args := append(append(slices.Clip(apt), "download"), pkgs...)
	if _, err := c.run(dir, "apt-get", args...); err != nil {
		if _, uerr := c.run("", "apt-get", append(slices.Clip(apt), "update")...); uerr != nil {
			return nil, fmt.Errorf("%w\nafter which: %w", err, uerr)
		}
		if _, err := c.run(dir, "apt-get", args...); err != nil {
			return nil, err
		}
	}
	var files []string
	for _, p := range pkgs {
		matches, _ := filepath.Glob(filepath.Join(dir, p+"_*.deb"))
		if len(matches) != 1 {
			return nil, fmt.Errorf("rxevm: apt-get download left %d %s_*.deb files in %s, want 1", len(matches), p, dir)
		}
		if _, err := c.run("", "dpkg-deb", "--info", matches[0]); err != nil {
			return nil, fmt.Errorf("rxevm: downloaded %s is not a valid package: %w", filepath.Base(matches[0]), err)
		}
		files = append(files, matches[0])
	}
	return files, nil
}
