package vm

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// Archive collects the files of an initramfs and writes them in the "newc"
// cpio format the kernel unpacks. Parent directories are created implicitly.
type Archive struct {
	entries map[string]entry
}

type entry struct {
	mode uint32 // full st_mode, type bits included
	data []byte // file contents or symlink target
	src  string // host file to copy, when data is nil
}

const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
)

// NewArchive returns an empty archive.
func NewArchive() *Archive { return &Archive{entries: map[string]entry{}} }

func (a *Archive) parents(name string) {
	for dir := path.Dir(name); dir != "/" && dir != "."; dir = path.Dir(dir) {
		if _, ok := a.entries[dir]; !ok {
			a.entries[dir] = entry{mode: modeDir | 0o755}
		}
	}
}

func clean(name string) string { return path.Clean("/" + name) }

// Dir adds an empty directory.
func (a *Archive) Dir(name string) {
	name = clean(name)
	a.parents(name)
	a.entries[name] = entry{mode: modeDir | 0o755}
}

// Bytes adds a regular file with the given contents and permission bits.
func (a *Archive) Bytes(name string, data []byte, perm os.FileMode) {
	name = clean(name)
	a.parents(name)
	a.entries[name] = entry{mode: modeRegular | uint32(perm.Perm()), data: data}
}

// File adds the host file src at name, keeping its permission bits. The file
// is read only when the archive is written.
func (a *Archive) File(name, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("rxevm: %s is not a regular file", src)
	}
	name = clean(name)
	a.parents(name)
	a.entries[name] = entry{mode: modeRegular | uint32(fi.Mode().Perm()), src: src}
	return nil
}

// Symlink adds a symbolic link name pointing at target.
func (a *Archive) Symlink(name, target string) {
	name = clean(name)
	a.parents(name)
	a.entries[name] = entry{mode: modeSymlink | 0o777, data: []byte(target)}
}

// Has reports whether name is in the archive.
func (a *Archive) Has(name string) bool {
	_, ok := a.entries[clean(name)]
	return ok
}

// WriteTo writes the archive, directories before their contents, ending with
// the TRAILER!!! record.
func (a *Archive) WriteTo(w io.Writer) (int64, error) {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names) // a parent sorts before its children
	cw := &countWriter{w: w}
	ino := uint32(1)
	for _, n := range names {
		e := a.entries[n]
		data := e.data
		if e.src != "" {
			b, err := os.ReadFile(e.src)
			if err != nil {
				return cw.n, err
			}
			data = b
		}
		if err := writeRecord(cw, ino, strings.TrimPrefix(n, "/"), e.mode, data); err != nil {
			return cw.n, err
		}
		ino++
	}
	err := writeRecord(cw, 0, "TRAILER!!!", 0, nil)
	return cw.n, err
}

// writeRecord writes one newc header, name and body, each padded to four
// bytes as the format requires.
func writeRecord(w *countWriter, ino uint32, name string, mode uint32, data []byte) error {
	nlink := 1
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	if _, err := io.WriteString(w, hdr+name+"\x00"); err != nil {
		return err
	}
	if err := w.pad(); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	return w.pad()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countWriter) pad() error {
	if r := c.n % 4; r != 0 {
		_, err := c.Write(make([]byte, 4-r))
		return err
	}
	return nil
}
