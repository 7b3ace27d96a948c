// Package abicheck pins Go structs to the C structs of the Linux uapi
// headers they mirror, for the ABI tests of packages uverbs and rxe: every
// size and every field offset is derived from the header, by gcc, not typed
// into the tests.
//
// A [Pin] names a C struct (or a member of one, such as one member of a
// union) and the Go type that mirrors it. [Check] reads the header's member
// names, matches each named Go field to the C member of the same name
// (case and underscores ignored: wrID is wr_id, MaxInlineData is
// max_inline_data), recursing into fields of struct type, and has gcc print
// sizeof and offsetof for every one; a Go field without a C member of its
// name, a size or an offset that differs, is an error. Blank (_) fields
// are padding: the sizes cover them.
//
// The headers are the uapi headers of the include directory named by
// PUREVERBS_UAPI_INCLUDE (make unit sets it to Debian 13's linux-libc-dev,
// Linux 6.12, which `rxevm uapi` unpacks into the rxevm cache), else those
// in an rxevm cache if `rxevm uapi` ran ($RXEVM_CACHE, the module's
// .cache/rxevm where make unit puts them, the user's cache directory),
// else the system's. With PUREVERBS_UAPI_INCLUDE set the checks cannot be
// skipped: without gcc or the headers, or with a header that lacks a
// member a Go type mirrors, Check fails and says what to install. Without
// it, headers that are missing or older than the Go types (a host with an
// older linux-libc-dev) skip the test with a message naming what they
// lack, as they cannot judge the Go types; gcc is still required.
package abicheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// EnvInclude names the include directory (holding rdma/ and linux/) whose
// headers Check compiles against instead of the system's.
const EnvInclude = "PUREVERBS_UAPI_INCLUDE"

// Pin ties a Go type to the C struct it mirrors.
type Pin struct {
	// C is the C type, e.g. "struct rxe_send_wr".
	C string
	// Member, if set, is a member designator inside C that the Go type
	// mirrors instead of the whole struct, e.g. "wr.flush".
	Member string
	// Go is the Go type; nil for a pin of Exprs only (code that reads a
	// struct by byte offsets).
	Go reflect.Type
	// Rename maps Go field paths ("wr.wr"), or bare field names ("typ")
	// wherever they occur, to the C member path within the enclosing C
	// struct, where the names differ: "typ" is "type", a Go field
	// standing for a union is one of its members ("wr" is "wr.ud"), a
	// field of a nested C struct the Go struct flattens is its path
	// ("DGID" is "grh.dgid"). A Go struct field mirroring a C scalar
	// (uverbs' ptr64 for an __aligned_u64) is checked as a whole.
	Rename map[string]string
	// Exprs are further values to compare: a C expression over the
	// headers (e.g. "offsetof(struct rxe_send_wqe, dma.sge)") and what Go
	// has for it.
	Exprs map[string]uintptr
}

// Check compiles headers (paths as in #include <...>) with gcc and fails t
// for every Go size, field size or offset of pins that differs from the C
// one.
func Check(t testing.TB, headers []string, pins []Pin) {
	t.Helper()
	inc := includeDir()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("abicheck: no gcc: the ABI pins need it (make unit installs it with apt-get: %v)", err)
	}
	// Headers nobody chose may be older than the Go types: what they lack
	// is collected and then skips the test rather than failing it.
	chosen := os.Getenv(EnvInclude) != ""
	var stale []string
	lacks := func(format string, args ...any) {
		t.Helper()
		if chosen {
			t.Errorf(format, args...)
		} else {
			stale = append(stale, fmt.Sprintf(format, args...))
		}
	}
	structs := map[string]*member{}
	for _, h := range headers {
		path, err := find(gcc, inc, h)
		if err != nil && !chosen {
			t.Skipf("abicheck: %v: the ABI pins are not checked here (install linux-libc-dev, or set %s to newer headers as make unit does)", err, EnvInclude)
		}
		if err != nil {
			t.Fatalf("abicheck: %v (install linux-libc-dev, or run make unit, which sets %s)", err, EnvInclude)
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for name, m := range parseHeader(string(src)) {
			structs[name] = m
		}
	}
	var rows []row
	for _, p := range pins {
		top, ok := structs[p.C]
		if !ok {
			lacks("abicheck: %s is not defined in %v", p.C, headers)
			continue
		}
		base := top
		if p.Member != "" {
			if base = top.lookup(p.Member, structs); base == nil {
				lacks("abicheck: %s has no member %s in these headers (older than the Go types: run `rxevm uapi` or make unit, or set %s to newer ones)", p.C, p.Member, EnvInclude)
				continue
			}
		}
		if p.Go != nil {
			rows = append(rows, row{pin: p, what: "size", c: sizeExpr(p.C, p.Member), got: p.Go.Size()})
			rows = matchFields(lacks, rows, p, structs, base, p.Go, "", p.Member, 0)
		}
		for c, v := range p.Exprs {
			rows = append(rows, row{pin: p, field: c, what: "value", c: c, got: v})
		}
	}
	if len(stale) > 0 {
		t.Skipf("abicheck: the headers in %s are older than the Go types, so the ABI pins are not checked here (set %s to newer ones, as make unit does):\n%s",
			or(inc, "/usr/include"), EnvInclude, strings.Join(stale, "\n"))
	}
	if t.Failed() {
		return
	}
	got := run(t, gcc, inc, chosen, headers, rows)
	t.Logf("abicheck: %d sizes and offsets of %d pinned types compared with gcc over %v (%s=%q)", len(rows), len(pins), headers, EnvInclude, inc)
	for i, r := range rows {
		if got[i] != uint64(r.got) {
			t.Errorf("%s: %s is %d in C (%s), %d in Go %v", r.name(), r.what, got[i], r.c, r.got, r.pin.Go)
		}
	}
}

// name says which pin and Go field a row is about.
func (r row) name() string {
	n := join(r.pin.C, r.pin.Member, " ")
	if r.field != "" {
		n += ": Go field " + r.field
	}
	return n
}

// row is one number to compare: what gcc prints for c and what Go says.
type row struct {
	pin   Pin
	field string // the Go field path, "" for the pinned type itself
	what  string // "size", "offset"
	c     string // the C expression gcc evaluates
	got   uintptr
}

func sizeExpr(ctype, designator string) string {
	if designator == "" {
		return "sizeof(" + ctype + ")"
	}
	return "sizeof(((" + ctype + " *)0)->" + designator + ")"
}

// matchFields adds the rows of typ's fields, which sit at offset off of the
// pinned Go type and mirror the C member cm (at designator cpath of p.C);
// lacks hears of a Go field without a C member.
func matchFields(lacks func(string, ...any), rows []row, p Pin, structs map[string]*member, cm *member, typ reflect.Type, gopath, cpath string, off uintptr) []row {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "_" {
			continue
		}
		path := join(gopath, f.Name, ".")
		rel, renamed := p.Rename[path]
		if !renamed {
			rel, renamed = p.Rename[f.Name]
		}
		var sub *member
		if renamed {
			sub = cm.lookup(rel, structs)
		} else if sub = cm.child(f.Name, structs); sub != nil {
			rel = sub.name
		}
		if sub == nil {
			lacks("abicheck: %s: Go field %s of %v has no C member %q (add a Rename, or these headers predate the member: set %s to newer ones, as make unit does)",
				join(p.C, p.Member, " "), path, p.Go, or(rel, f.Name), EnvInclude)
			continue
		}
		designator := join(cpath, rel, ".")
		baseOff := "0"
		if p.Member != "" {
			baseOff = "offsetof(" + p.C + ", " + p.Member + ")"
		}
		rows = append(rows,
			row{pin: p, field: path, what: "offset", c: "offsetof(" + p.C + ", " + designator + ") - " + baseOff, got: off + f.Offset},
			row{pin: p, field: path, what: "size", c: sizeExpr(p.C, designator), got: f.Type.Size()})
		if f.Type.Kind() == reflect.Struct && len(sub.members(structs)) > 0 {
			rows = matchFields(lacks, rows, p, structs, sub, f.Type, path, designator, off+f.Offset)
		}
	}
	return rows
}

func join(a, b, sep string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + sep + b
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// includeDir is PUREVERBS_UAPI_INCLUDE, else the headers `rxevm uapi`
// unpacked into an rxevm cache if it did: $RXEVM_CACHE, the module's own
// .cache/rxevm (the Makefile's default, so that a plain go test in a
// checkout where make unit ran uses them), the user's cache directory;
// else "" (the system's).
func includeDir() string {
	if inc := os.Getenv(EnvInclude); inc != "" {
		return inc
	}
	var caches []string
	if c := os.Getenv("RXEVM_CACHE"); c != "" {
		caches = append(caches, c)
	}
	if root := moduleRoot(); root != "" {
		caches = append(caches, filepath.Join(root, ".cache", "rxevm"))
	}
	if base, err := os.UserCacheDir(); err == nil {
		caches = append(caches, filepath.Join(base, "pureverbs", "rxevm"))
	}
	for _, cache := range caches {
		if d := filepath.Join(cache, "uapi", "trixie", "usr", "include"); exists(filepath.Join(d, "rdma", "ib_user_verbs.h")) {
			return d
		}
	}
	return ""
}

// moduleRoot is the nearest directory at or above the working directory
// (go test's: the package's) that holds a go.mod, or "".
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if exists(filepath.Join(dir, "go.mod")) {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// find resolves an #include <h> the way gcc would with inc first.
func find(gcc, inc, h string) (string, error) {
	if inc != "" {
		if p := filepath.Join(inc, h); exists(p) {
			return p, nil
		}
		return "", fmt.Errorf("no %s under %s=%s", h, EnvInclude, inc)
	}
	out, err := exec.Command(gcc, "-print-sysroot").Output()
	sysroot := strings.TrimSpace(string(out))
	if err != nil {
		sysroot = ""
	}
	for _, dir := range []string{"/usr/local/include", "/usr/include"} {
		if p := filepath.Join(sysroot, dir, h); exists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no <%s> on this machine", h)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// includeFlags are gcc's flags for inc: the directory and its multiarch
// subdirectory (asm/) for this machine, ahead of the system's.
func includeFlags(gcc, inc string) []string {
	if inc == "" {
		return nil
	}
	flags := []string{"-isystem", inc}
	if out, err := exec.Command(gcc, "-dumpmachine").Output(); err == nil {
		if d := filepath.Join(inc, strings.TrimSpace(string(out))); exists(d) {
			flags = append(flags, "-isystem", d)
		}
	}
	return flags
}

// run compiles and runs a program printing every row's C value; a program
// that does not compile against headers nobody chose (an Expr over a
// member they lack) skips t.
func run(t testing.TB, gcc, inc string, chosen bool, headers []string, rows []row) []uint64 {
	t.Helper()
	var src strings.Builder
	src.WriteString("#include <stddef.h>\n#include <stdio.h>\n")
	for _, h := range headers {
		fmt.Fprintf(&src, "#include <%s>\n", h)
	}
	src.WriteString("int main(void) {\n")
	for _, r := range rows {
		fmt.Fprintf(&src, "\tprintf(\"%%zu\\n\", (size_t)(%s));\n", r.c)
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	c, bin := filepath.Join(dir, "abi.c"), filepath.Join(dir, "abi")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(includeFlags(gcc, inc), "-o", bin, c)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		if !chosen {
			t.Skipf("abicheck: the pins do not compile against the headers in %s, which may be older than the Go types (set %s to newer ones, as make unit does): gcc %v: %v\n%s",
				or(inc, "/usr/include"), EnvInclude, args, err, out)
		}
		t.Fatalf("abicheck: gcc %v: %v\n%s", args, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(rows) {
		t.Fatalf("abicheck: the program printed %d values for %d rows", len(lines), len(rows))
	}
	vals := make([]uint64, len(lines))
	for i, l := range lines {
		if _, err := fmt.Sscan(l, &vals[i]); err != nil {
			t.Fatalf("abicheck: value %q: %v", l, err)
		}
	}
	return vals
}
