package main

import (
	"cmp"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

type resolverConfig struct {
	roots []string // host directories holding the guest's files
}

// resolver names user addresses through the processes' mappings and the
// ELF files behind them.
type resolver struct {
	cfg  resolverConfig
	elfs map[string]*objectSyms // by host path
}

// sym is one function symbol of an object, at its link-time address.
type sym struct {
	addr, size uint64
	name       string
}

// objectSyms is what an ELF file tells about its code: the loaded
// segments (to turn a file offset into a link-time address) and the
// function symbols, sorted.
type objectSyms struct {
	loads []elf.ProgHeader
	syms  []sym
	err   error // the file could not be read: its addresses stay unnamed
}

// ksym is a kernel text symbol.
type ksym struct {
	addr   uint64
	name   string
	module string // vmlinux or the module's name
}

func newResolver(cfg resolverConfig) *resolver {
	return &resolver{cfg: cfg, elfs: map[string]*objectSyms{}}
}

func sortKsyms(s []ksym) {
	slices.SortFunc(s, func(a, b ksym) int { return cmp.Compare(a.addr, b.addr) })
}

// kernelFar is how far past a symbol an address still counts as its:
// beyond it lies what kallsyms does not list (a module's end, BPF).
const kernelFar = 64 << 10

// kernelPlace names a kernel address by the boot's symbols.
func kernelPlace(ksyms []ksym, addr uint64) key {
	if s, ok := nearest(ksyms, addr); ok && addr-s.addr < kernelFar {
		return key{placeKernel, s.module, s.name}
	}
	return key{placeKernel, "?", "?"}
}

// nearest is the last symbol at or below addr.
func nearest(s []ksym, addr uint64) (ksym, bool) {
	i, found := slices.BinarySearchFunc(s, addr, func(x ksym, a uint64) int { return cmp.Compare(x.addr, a) })
	if found {
		return s[i], true
	}
	if i == 0 {
		return ksym{}, false
	}
	return s[i-1], true
}

// user names a user address: the profiled process that maps it and the
// symbol there.
func (r *resolver) user(bl *bootLog, addr uint64) key {
	var hit *mapping
	for i := range bl.maps {
		m := &bl.maps[i]
		if addr < m.start || addr >= m.end {
			continue
		}
		if hit != nil && hit.pid != m.pid {
			return key{placeShared, path.Base(m.path), "?"}
		}
		hit = m
	}
	if hit == nil {
		return key{placeOther, "?", "?"}
	}
	role := bl.roles[hit.pid]
	if hit.path == "" || strings.HasPrefix(hit.path, "[") {
		return key{role, hit.path, "?"}
	}
	obj := path.Base(hit.path)
	return key{role, obj, r.object(bl, hit.path).name(addr-hit.start+hit.offset, obj)}
}

// object reads (once) the ELF file behind a guest path: a copy of that
// name in the boot's directory (the profiled build of the Go tool), else
// the file under the first root that has it. A file the guest printed a
// checksum for must match it: names from another build would be wrong.
func (r *resolver) object(bl *bootLog, guest string) *objectSyms {
	host := ""
	if p := filepath.Join(bl.dir, path.Base(guest)); isFile(p) {
		host = p
	} else {
		for _, root := range r.cfg.roots {
			if p := filepath.Join(root, guest); isFile(p) {
				host = p
				break
			}
		}
	}
	if host == "" {
		return &objectSyms{err: fmt.Errorf("%s: not found under the roots", guest)}
	}
	if o, ok := r.elfs[host]; ok {
		return o
	}
	o := &objectSyms{}
	r.elfs[host] = o
	if want, ok := bl.sums[guest]; ok {
		if got, err := fileSum(host); err != nil || got != want {
			o.err = fmt.Errorf("%s: not the build the guest ran (%s)", host, guest)
			return o
		}
	}
	o.loads, o.syms, o.err = readObject(host)
	return o
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func fileSum(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", sha256.Sum256(b)), nil
}

func readObject(p string) ([]elf.ProgHeader, []sym, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var loads []elf.ProgHeader
	for _, ph := range f.Progs {
		if ph.Type == elf.PT_LOAD {
			loads = append(loads, ph.ProgHeader)
		}
	}
	var syms []sym
	static, _ := f.Symbols() // stripped: none
	dynamic, _ := f.DynamicSymbols()
	for _, s := range append(static, dynamic...) {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			syms = append(syms, sym{s.Value, s.Size, s.Name})
		}
	}
	slices.SortFunc(syms, func(a, b sym) int { return cmp.Compare(a.addr, b.addr) })
	return loads, slices.CompactFunc(syms, func(a, b sym) bool { return a.addr == b.addr }), nil
}

// unnamedChunk groups the addresses no symbol covers (static functions
// of a stripped library) by this many bytes: objdump tells the rest.
const unnamedChunk = 0x100

// name is the symbol at file offset off: the loaded segment holding it
// gives the link-time address.
func (o *objectSyms) name(off uint64, obj string) string {
	if o.err != nil {
		return "?"
	}
	var v uint64
	found := false
	for _, ph := range o.loads {
		if off >= ph.Off && off < ph.Off+ph.Filesz {
			v, found = off-ph.Off+ph.Vaddr, true
			break
		}
	}
	if !found {
		return fmt.Sprintf("?off+%#x", off)
	}
	i, exact := slices.BinarySearchFunc(o.syms, v, func(s sym, a uint64) int { return cmp.Compare(s.addr, a) })
	if !exact {
		i--
	}
	if i >= 0 && (v < o.syms[i].addr+o.syms[i].size || o.syms[i].size == 0 && exact) {
		return o.syms[i].name
	}
	return fmt.Sprintf("%s+%#x", obj, v&^(unnamedChunk-1))
}
