package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// place is who ran an instruction: a role TestInsnProfile printed (the
// pair's client or server), the kernel, or anything else in the guest.
const (
	placeKernel = "kernel"
	placeOther  = "other"
	// placeShared is user code that more than one profiled process maps
	// at that address (the Go tool is linked apart so that it does not).
	placeShared = "shared"
)

// key is where instructions ran: place, object (a file's base name,
// [vdso], vmlinux or a module) and symbol.
type key struct {
	place, object, symbol string
}

// bootCount is one boot's profile, named.
type bootCount struct {
	name   string // the boot's path stem
	label  string // the pair's client kind
	iters  int
	idleUS int64 // how long the CPUs idled while the pair ran
	counts map[key]uint64
}

// mapping is one executable mapping of a profiled process.
type mapping struct {
	pid        int
	start, end uint64
	offset     uint64
	path       string
}

// bootLog is what TestInsnProfile printed about one boot.
type bootLog struct {
	label  string
	iters  int
	roles  map[int]string // pid -> role
	maps   []mapping
	ksyms  []ksym            // the kernel's text symbols, sorted
	idleUS int64             // how long the CPUs idled while the pair ran
	sums   map[string]string // guest path -> SHA-256 (hex) the guest printed
	dir    string            // the boot's directory: guest files' copies first
}

// maxUserAddress is the top of x86-64 and arm64 user space (48 bits);
// the kernel's addresses are above it.
const maxUserAddress = 1 << 47

func countBoot(logPath, profPath string, res *resolver) (*bootCount, error) {
	bl, err := readBootLog(logPath)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(profPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bc := &bootCount{name: strings.TrimSuffix(logPath, ".log"), label: bl.label, iters: bl.iters, idleUS: bl.idleUS, counts: map[key]uint64{}}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		addr, insns, execs, err := parseProfileLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", profPath, line, err)
		}
		var k key
		if addr >= maxUserAddress {
			k = kernelPlace(bl.ksyms, addr)
		} else {
			k = res.user(bl, addr)
		}
		bc.counts[k] += insns * execs
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", profPath, err)
	}
	return bc, nil
}

// parseProfileLine reads the plugin's "addr(hex) insns execs".
func parseProfileLine(s string) (addr, insns, execs uint64, err error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("want 3 fields, have %q", s)
	}
	if addr, err = strconv.ParseUint(f[0], 16, 64); err != nil {
		return 0, 0, 0, err
	}
	if insns, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return 0, 0, 0, err
	}
	if execs, err = strconv.ParseUint(f[2], 10, 64); err != nil {
		return 0, 0, 0, err
	}
	return addr, insns, execs, nil
}

// readBootLog collects TestInsnProfile's lines from a boot's output;
// other lines are ignored.
func readBootLog(path string) (*bootLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bl := &bootLog{roles: map[int]string{}, sums: map[string]string{}, dir: filepath.Dir(path)}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		if err := bl.add(strings.TrimSpace(sc.Text())); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case bl.label == "":
		return nil, fmt.Errorf("%s: no insnprof-run line (did TestInsnProfile run?)", path)
	case len(bl.ksyms) == 0:
		return nil, fmt.Errorf("%s: no insnprof-ksym lines", path)
	}
	sortKsyms(bl.ksyms)
	return bl, nil
}

// add takes one line of the log.
func (bl *bootLog) add(s string) error {
	tag, rest, _ := strings.Cut(s, " ")
	f := strings.Fields(rest)
	switch tag {
	case "insnprof-run": // label role pid iterations
		if len(f) != 4 {
			return fmt.Errorf("run line %q", s)
		}
		pid, err1 := strconv.Atoi(f[2])
		iters, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || iters <= 0 {
			return fmt.Errorf("run line %q", s)
		}
		if bl.label != "" && (bl.label != f[0] || bl.iters != iters) {
			return fmt.Errorf("two pairs in one boot (%s x %d, %s x %d)", bl.label, bl.iters, f[0], iters)
		}
		bl.label, bl.iters, bl.roles[pid] = f[0], iters, f[1]
	case "insnprof-map": // pid start-end perms offset dev inode [path]
		if len(f) < 6 {
			return fmt.Errorf("map line %q", s)
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			return fmt.Errorf("map line %q", s)
		}
		lo, hi, ok := strings.Cut(f[1], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[3], 16, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil || end <= start {
			return fmt.Errorf("map line %q", s)
		}
		m := mapping{pid: pid, start: start, end: end, offset: off}
		if len(f) > 6 {
			m.path = f[6]
		}
		for _, o := range bl.maps {
			if o == m {
				return nil // printed again when another mapping changed
			}
		}
		bl.maps = append(bl.maps, m)
	case "insnprof-idle": // microseconds
		if len(f) != 1 {
			return fmt.Errorf("idle line %q", s)
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return fmt.Errorf("idle line %q", s)
		}
		bl.idleUS = v
	case "insnprof-sum": // path sha256
		if len(f) != 2 {
			return fmt.Errorf("sum line %q", s)
		}
		bl.sums[f[0]] = f[1]
	case "insnprof-ksym": // addr type name [[module]]
		if len(f) != 3 && len(f) != 4 {
			return fmt.Errorf("ksym line %q", s)
		}
		v, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return fmt.Errorf("ksym line %q", s)
		}
		ks := ksym{addr: v, name: f[2], module: "vmlinux"}
		if len(f) == 4 {
			ks.module = strings.Trim(f[3], "[]")
		}
		bl.ksyms = append(bl.ksyms, ks)
	}
	return nil
}
