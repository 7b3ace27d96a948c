// Command insnprof names the guest instructions QEMU's insnprof plugin
// (integration/testdata/insnprof) counted in TestInsnProfile's boots, and
// prints what one iteration costs, per process, object and symbol:
//
//	go run ./integration/internal/insnprof -root .cache/rxevm/peers -root / BOOT...
//
// Each BOOT names a test log, BOOT.log, and the plugin's profile of the
// same boot, BOOT.prof. A guest file is read from the BOOT's directory
// when a file of its name is there (the build of the Go tool the boot
// ran, linked at its own address), else from under the roots. A boot ran one pair (its label: the client's
// kind); two boots of a label with different iteration counts give the
// iterations' cost as their difference, so that the boot itself, set-up
// and exit cancel out. Labels print side by side.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	var roots multiFlag
	flag.Var(&roots, "root", "a host directory the guest's files are found under (repeatable, first match wins)")
	top := flag.Int("top", 25, "symbols to print per process and for the kernel")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: insnprof [-root DIR]... BOOT...")
		os.Exit(2)
	}
	if err := run(os.Stdout, flag.Args(), resolverConfig{roots: roots}, *top); err != nil {
		fmt.Fprintln(os.Stderr, "insnprof:", err)
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func run(w io.Writer, boots []string, cfg resolverConfig, top int) error {
	res := newResolver(cfg)
	var all []*bootCount
	for _, b := range boots {
		c, err := countBoot(b+".log", b+".prof", res)
		if err != nil {
			return err
		}
		all = append(all, c)
	}
	per, err := perIteration(all)
	if err != nil {
		return err
	}
	report(w, per, top)
	return nil
}
