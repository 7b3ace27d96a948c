package streamperf

import (
	"bufio"
	"io"
	"os"
)

// Stdout is the tools' standard output buffered as C's stdio buffers it:
// line by line on a terminal, in full otherwise (so a pipe sees the table
// only at exit, after anything written to stderr). flush writes out what
// is left.
func Stdout() (w io.Writer, flush func() error) {
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return os.Stdout, func() error { return nil } // every write is a whole line
	}
	b := bufio.NewWriter(os.Stdout)
	return b, b.Flush
}
