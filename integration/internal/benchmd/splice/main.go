// Command splice copies a bench run's output from stdin to stdout and then
// writes the Markdown sections the run printed (package benchmd) into the
// README files named on the command line, each into the one file that has
// its markers:
//
//	{ RXEVM_BENCH_MARKDOWN=1 make itest ...; echo "bench-exit $?"; } | go run ./integration/internal/benchmd/splice tools/perftest/README.md
//
// A last line "bench-exit N" is the run's exit status (a POSIX shell has no
// pipefail): with N other than 0 nothing is written and splice exits N.
// A section that no file has markers for, or that two files have, fails;
// a run that printed no section (a subset of rows) changes nothing.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/pureverbs/pureverbs/integration/internal/benchmd"
)

func main() {
	code, err := run(os.Stdin, os.Stdout, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "splice:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

var exitLine = regexp.MustCompile(`(?m)^bench-exit (\d+)\r?\n?\z`)

// run copies in to out, then splices; it returns the exit status.
func run(in io.Reader, out io.Writer, files []string) (int, error) {
	if len(files) == 0 {
		return 2, errors.New("usage: splice README.md... < output")
	}
	var log bytes.Buffer
	if _, err := io.Copy(io.MultiWriter(out, &log), in); err != nil {
		return 1, fmt.Errorf("reading the output: %w", err)
	}
	if m := exitLine.FindSubmatch(log.Bytes()); m != nil {
		if code, _ := strconv.Atoi(string(m[1])); code != 0 {
			fmt.Fprintf(out, "splice: the run failed (exit %d): no README changed\n", code)
			return code, nil
		}
	}
	sections, err := benchmd.Extract(&log)
	if err != nil {
		return 1, err
	}
	if len(sections) == 0 {
		// A subset run (RXEVM_BENCHROWS) prints none: its table is not the README's.
		fmt.Fprintln(out, "splice: the run printed no Markdown section: no README changed")
		return 0, nil
	}
	docs := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 1, err
		}
		docs[f] = b
	}
	names := make([]string, 0, len(sections))
	for name := range sections {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var into []string
		for _, f := range files {
			b, err := benchmd.Splice(docs[f], name, sections[name])
			if errors.Is(err, benchmd.ErrNoMarkers) {
				continue
			}
			if err != nil {
				return 1, fmt.Errorf("%s: %w", f, err)
			}
			docs[f] = b
			into = append(into, f)
		}
		switch len(into) {
		case 0:
			return 1, fmt.Errorf("section %s: none of %v has its markers", name, files)
		case 1:
			fmt.Fprintf(out, "splice: section %s written into %s\n", name, into[0])
		default:
			return 1, fmt.Errorf("section %s: markers in more than one file: %v", name, into)
		}
	}
	for _, f := range files {
		if err := writeFile(f, docs[f]); err != nil {
			return 1, err
		}
	}
	return 0, nil
}

// writeFile replaces f with b through a rename, so that an interrupted
// write leaves the old file.
func writeFile(f string, b []byte) error {
	old, err := os.ReadFile(f)
	if err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(f), ".splice-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", f, err)
	}
	return nil
}
