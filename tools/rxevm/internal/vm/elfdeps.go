package vm

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// guestLib is a library for the image: its path in the guest and the host
// file holding its contents.
type guestLib struct{ guest, host string }

// neededIn returns what the ELF files need at run time, resolved inside
// root (an unpacked tree of another architecture's packages, which ldd
// cannot run): each one's interpreter and the closure of their DT_NEEDED
// libraries, looked up in root's multiarch and plain library directories,
// plus the extra libraries named (loaded with dlopen). A library that is
// not in root is an error naming it and who needs it.
func neededIn(root, triple string, elfs, extra []string) ([]guestLib, error) {
	dirs := []string{"/lib/" + triple, "/usr/lib/" + triple, "/lib", "/usr/lib"}
	var out []guestLib
	seen := map[string]bool{}
	add := func(guest string) error {
		if seen[guest] {
			return nil
		}
		seen[guest] = true
		host, err := resolveMergedIn(root, guest)
		if err != nil {
			return err
		}
		out = append(out, guestLib{guest, host})
		return nil
	}
	find := func(name, by string) (string, error) {
		for _, d := range dirs {
			g := path.Join(d, name)
			if _, err := resolveIn(root, g); err == nil {
				return g, nil
			}
		}
		return "", fmt.Errorf("rxevm: %s needs %s, which is in no unpacked package under %s", by, name, root)
	}
	queue := append([]string{}, elfs...)
	for _, name := range extra {
		g, err := find(name, "rdma-core (dlopen)")
		if err != nil {
			return nil, err
		}
		if err := add(g); err != nil {
			return nil, err
		}
		queue = append(queue, filepath.Join(root, g))
	}
	done := map[string]bool{}
	for len(queue) > 0 {
		file := queue[0]
		queue = queue[1:]
		if done[file] {
			continue
		}
		done[file] = true
		interp, needed, err := elfNeeds(file)
		if err != nil {
			return nil, err
		}
		if interp != "" {
			if err := add(interp); err != nil {
				return nil, fmt.Errorf("rxevm: interpreter of %s: %w", file, err)
			}
		}
		for _, n := range needed {
			g, err := find(n, file)
			if err != nil {
				return nil, err
			}
			if err := add(g); err != nil {
				return nil, err
			}
			host, _ := resolveMergedIn(root, g)
			queue = append(queue, host)
		}
	}
	return out, nil
}

// elfNeeds reads an ELF file's interpreter (PT_INTERP, "" if static) and
// DT_NEEDED names.
func elfNeeds(file string) (interp string, needed []string, err error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", nil, fmt.Errorf("rxevm: %s: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", nil, fmt.Errorf("rxevm: %s: interpreter: %w", file, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, err = f.DynString(elf.DT_NEEDED)
	if err != nil {
		return "", nil, fmt.Errorf("rxevm: %s: DT_NEEDED: %w", file, err)
	}
	return interp, needed, nil
}

// resolveMergedIn is resolveIn for a tree of merged-/usr packages
// (trixie's): they ship /usr/lib64/ld-linux-x86-64.so.2 but not the /lib64
// link a system gets from base-files, so a path under /lib, /lib64, /bin or
// /sbin missing from the tree is looked up under /usr as well.
func resolveMergedIn(root, p string) (string, error) {
	host, err := resolveIn(root, p)
	if err == nil {
		return host, nil
	}
	clean := path.Clean("/" + p)
	for _, top := range []string{"/lib/", "/lib64/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(clean, top) {
			if h, uerr := resolveIn(root, "/usr"+clean); uerr == nil {
				return h, nil
			}
		}
	}
	return "", err
}

// resolveIn follows symbolic links for guest path p inside root (absolute
// link targets are taken relative to root, not the host) and returns the
// host path of the regular file it ends at.
func resolveIn(root, p string) (string, error) {
	cur := path.Clean("/" + p)
	for hops := 0; hops < 40; hops++ {
		// Resolve the directories first: /lib may itself be a link (usrmerge).
		dir, base := path.Split(cur)
		if d := path.Clean(dir); d != "/" {
			rd, err := resolveDirIn(root, d, hops)
			if err != nil {
				return "", err
			}
			cur = path.Join(rd, base)
		}
		host := filepath.Join(root, filepath.FromSlash(cur))
		fi, err := os.Lstat(host)
		if err != nil {
			return "", fmt.Errorf("rxevm: %s: not in %s", p, root)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if !fi.Mode().IsRegular() {
				return "", fmt.Errorf("rxevm: %s in %s is not a regular file", p, root)
			}
			return host, nil
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", fmt.Errorf("rxevm: %w", err)
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(cur), target)
		}
		cur = path.Clean(target)
	}
	return "", fmt.Errorf("rxevm: %s in %s: too many symbolic links", p, root)
}

// resolveDirIn resolves the directory d (a guest path) inside root.
func resolveDirIn(root, d string, hops int) (string, error) {
	parts := strings.Split(strings.TrimPrefix(d, "/"), "/")
	cur := "/"
	for i := 0; i < len(parts); i++ {
		next := path.Join(cur, parts[i])
		host := filepath.Join(root, filepath.FromSlash(next))
		fi, err := os.Lstat(host)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("rxevm: %s in %s: too many symbolic links", d, root)
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", fmt.Errorf("rxevm: %w", err)
		}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		cur = path.Clean(target)
	}
	return cur, nil
}
