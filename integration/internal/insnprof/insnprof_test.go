package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testObject is a real ELF file (this command, built into dir under
// guest's base name: go test strips its binaries' symbols) and one function symbol in it with the
// mapping that loads it, so that names come from real segment and
// symbol tables.
type testObject struct {
	guest    string
	sym      elf.Symbol
	start    uint64 // where the boot mapped the segment holding sym
	offset   uint64 // that mapping's file offset
	symOff   uint64 // sym's file offset
	checksum string
}

func newTestObject(t *testing.T, dir, guest string) testObject {
	t.Helper()
	exe := filepath.Join(dir, filepath.Base(guest))
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	o := testObject{guest: guest, checksum: fmt.Sprintf("%x", sha256.Sum256(b))}
	for _, s := range syms {
		if s.Name == "main.parseProfileLine" {
			o.sym = s
		}
	}
	if o.sym.Name == "" {
		t.Fatal("no main.parseProfileLine in the test binary")
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && o.sym.Value >= p.Vaddr && o.sym.Value < p.Vaddr+p.Filesz {
			// Mapped somewhere else than linked, as a PIE or a library
			// is: 0x7f0000000000 plus the page of its file offset.
			o.offset = p.Off &^ 0xfff
			o.start = 0x7f0000000000 + o.offset
			o.symOff = o.sym.Value - p.Vaddr + p.Off
			return o
		}
	}
	t.Fatal("no loaded segment holds main.parseProfileLine")
	return o
}

// addr is where the boot ran sym's byte at off.
func (o testObject) addr(off uint64) uint64 { return o.start - o.offset + o.symOff + off }

// writeBoot writes a boot's log and profile into dir as stem.log and
// stem.prof.
func writeBoot(t *testing.T, dir, stem string, log []string, prof []string) string {
	t.Helper()
	p := filepath.Join(dir, stem)
	if err := os.WriteFile(p+".log", []byte(strings.Join(log, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".prof", []byte(strings.Join(prof, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPerIteration runs two boots of one pair through the reader: the
// client's function, the kernel's symbols (vmlinux's and a module's, at
// addresses KASLR moved differently in each boot), code nobody profiled
// maps, and code two profiled processes map at one address. What the
// second boot has beyond the first, per extra iteration, is each place's
// cost.
func TestPerIteration(t *testing.T) {
	dir := t.TempDir()
	obj := newTestObject(t, dir, "/usr/local/bin/tool")
	boot := func(stem string, iters int, kbase uint64, execs uint64) string {
		log := []string{
			"=== RUN   TestInsnProfile",
			fmt.Sprintf("insnprof-run go server 98 %d", iters),
			fmt.Sprintf("insnprof-run go client 99 %d", iters),
			fmt.Sprintf("insnprof-sum %s %s", obj.guest, obj.checksum),
			fmt.Sprintf("insnprof-map 99 %x-%x r-xp %08x 00:02 119 %s", obj.start, obj.start+0x1000000, obj.offset, obj.guest),
			"insnprof-map 99 7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0 [vdso]",
			// The server maps a library where the client maps its vDSO.
			"insnprof-map 98 7ffc00001000-7ffc00003000 r-xp 00000000 00:02 7 /lib/libx.so",
			fmt.Sprintf("insnprof-ksym %x T do_syscall_64", kbase+0x1000),
			fmt.Sprintf("insnprof-ksym %x t rxe_requester [rdma_rxe]", kbase+0x40000000),
			"some other line of the test's output",
		}
		prof := []string{
			fmt.Sprintf("%x 5 %d", obj.addr(0), 10*execs),       // the client's function
			fmt.Sprintf("%x 3 %d", obj.addr(4), 10*execs),       // its middle: a block of its own
			fmt.Sprintf("%x 2 %d", kbase+0x1010, 3*execs),       // the kernel
			fmt.Sprintf("%x 4 %d", kbase+0x40000020, 1*execs),   // the module
			fmt.Sprintf("%x 1 %d", uint64(0x7ffc00000800), 100), // the client's vDSO, set-up only
			fmt.Sprintf("%x 1 %d", uint64(0x7ffc00001800), 7),   // both map it
			fmt.Sprintf("%x 6 %d", uint64(0x500000), 50+execs),  // nobody profiled: the test binary
		}
		return writeBoot(t, dir, stem, log, prof)
	}
	// Boot noise: the n boot's set-up costs what the 3n boot's does.
	a := boot("go-1000", 1000, 0xffffffff81000000, 1000+40)
	b := boot("go-3000", 3000, 0xffffffffa2000000, 3000+40)
	var out strings.Builder
	if err := run(&out, []string{a, b}, resolverConfig{}, 10); err != nil {
		t.Fatal(err)
	}
	res := newResolver(resolverConfig{})
	var boots []*bootCount
	for _, p := range []string{a, b} {
		bc, err := countBoot(p+".log", p+".prof", res)
		if err != nil {
			t.Fatal(err)
		}
		boots = append(boots, bc)
	}
	per, err := perIteration(boots)
	if err != nil {
		t.Fatal(err)
	}
	want := map[key]float64{
		{"client", "tool", "main.parseProfileLine"}: 80, // (5+3) × 10
		{placeKernel, "vmlinux", "do_syscall_64"}:   6,
		{placeKernel, "rdma_rxe", "rxe_requester"}:  4,
		{"client", "[vdso]", "?"}:                   0,
		{placeShared, "libx.so", "?"}:               0,
		{placeOther, "?", "?"}:                      6,
	}
	if diff := cmp.Diff(want, per[0].cost); diff != "" {
		t.Errorf("per-iteration cost (-want +got):\n%s\nreport:\n%s", diff, out.String())
	}
	if !strings.Contains(out.String(), "main.parseProfileLine") {
		t.Errorf("the report does not name the client's function:\n%s", out.String())
	}
}

// TestWrongBuildStaysUnnamed: a copy of the Go tool that is not the
// build the guest ran (another checksum) names nothing.
func TestWrongBuildStaysUnnamed(t *testing.T) {
	dir := t.TempDir()
	obj := newTestObject(t, dir, "/usr/local/bin/tool")
	bl := &bootLog{roles: map[int]string{99: "client"}, sums: map[string]string{obj.guest: strings.Repeat("0", 64)}, dir: dir,
		maps: []mapping{{pid: 99, start: obj.start, end: obj.start + 0x1000000, offset: obj.offset, path: obj.guest}}}
	res := newResolver(resolverConfig{})
	if k := res.user(bl, obj.addr(0)); k.symbol != "?" {
		t.Errorf("a build with another checksum named %#x %q", obj.addr(0), k.symbol)
	}
	bl.sums[obj.guest] = obj.checksum
	res = newResolver(resolverConfig{})
	if k := res.user(bl, obj.addr(0)); k.symbol != "main.parseProfileLine" {
		t.Errorf("the right build named %#x %q", obj.addr(0), k.symbol)
	}
}

func TestShortSymbol(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/pureverbs/pureverbs/rxe.postRing[go.shape.struct { SGEs []uverbs.SGE; AH *rxe.AH }].func1": "rxe.postRing[…].func1",
		"runtime.mapaccess2_fast64": "runtime.mapaccess2_fast64",
		"a[go.shape.int64]":         "a[…]",
		"unbalanced[go.shape.x":     "unbalanced[go.shape.x",
	} {
		if got := shortSymbol(in); got != want {
			t.Errorf("shortSymbol(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ log, prof []string }{
		"no run line":     {[]string{"insnprof-ksym ffffffff81000000 T x"}, []string{"1 1 1"}},
		"no kernel":       {[]string{"insnprof-run go client 1 10"}, []string{"1 1 1"}},
		"two pairs":       {[]string{"insnprof-run go client 1 10", "insnprof-run c client 2 20", "insnprof-ksym ffffffff81000000 T x"}, nil},
		"bad map":         {[]string{"insnprof-run go client 1 10", "insnprof-map 1 zz-10 r-xp 0 0 0 /x"}, nil},
		"bad profile":     {[]string{"insnprof-run go client 1 10", "insnprof-ksym ffffffff81000000 T x"}, []string{"12 zz 1"}},
		"short profile":   {[]string{"insnprof-run go client 1 10", "insnprof-ksym ffffffff81000000 T x"}, []string{"12 1"}},
		"zero iterations": {[]string{"insnprof-run go client 1 0"}, nil},
	} {
		p := writeBoot(t, dir, "b", c.log, c.prof)
		if _, err := countBoot(p+".log", p+".prof", &resolver{elfs: map[string]*objectSyms{}}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	one := &bootCount{label: "go", iters: 10}
	if _, err := perIteration([]*bootCount{one}); err == nil {
		t.Error("perIteration with one boot of a label: no error")
	}
	if _, err := perIteration([]*bootCount{one, {label: "go", iters: 10}}); err == nil {
		t.Error("perIteration with two boots of the same count: no error")
	}
}
