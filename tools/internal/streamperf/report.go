package streamperf

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// Header is the table's title line, printed once by each end before it
// connects (after listening, on the server); the C tools' format.
var Header = fmt.Sprintf("%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n",
	"name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")

// SizeStr formats a byte count as the C tools' size_str: 1k, 1.5m, 64
// (a tenth shown only below 10 units, never a trailing .0).
func SizeStr(size int64) string {
	base, mag := int64(1), ""
	switch {
	case size >= 1<<30:
		base, mag = 1<<30, "g"
	case size >= 1<<20:
		base, mag = 1<<20, "m"
	case size >= 1<<10:
		base, mag = 1<<10, "k"
	}
	var fraction int64
	if size/base < 10 {
		fraction = size % base * 10 / base
	}
	if fraction != 0 {
		return fmt.Sprintf("%d.%d%s", size/base, fraction, mag)
	}
	return fmt.Sprintf("%d%s", size/base, mag)
}

// CntStr formats a count as the C tools' cnt_str: 1k, 100, 2m (decimal
// thousands, truncated).
func CntStr(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return fmt.Sprintf("%d", n)
}

// Test is one line of the table: Count transfers of Size bytes each way,
// repeated Iterations times.
type Test struct {
	Name       string // "custom", "4k_lat", "64k_bw"
	Size       int
	Count      int
	Iterations int
}

// PerfLine is the C tools' show_perf line for t taking elapsed (counted
// in whole microseconds, as their gettimeofday difference is). The
// arithmetic is theirs, single-precision parts included, so the figures
// match to the last printed digit for the same elapsed time.
func PerfLine(t Test, elapsed time.Duration) string {
	usec := float32(elapsed.Microseconds())
	bytes := int64(t.Iterations) * int64(t.Count) * int64(t.Size) * 2
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s%-8s%-8s%-8s%-8s", t.Name, SizeStr(int64(t.Size)), CntStr(int64(t.Count)),
		CntStr(int64(t.Iterations)), SizeStr(bytes))
	seconds := float64(usec) / 1000000.
	gbps := float64(bytes*8) / (1000. * float64(usec))
	perXfer := usec / float32(t.Iterations) / float32(t.Count*2)
	b.WriteString(cfloat(seconds, 8))
	b.WriteString("s")
	b.WriteString(cfloat(gbps, 10))
	b.WriteString(cfloat(float64(perXfer), 11))
	b.WriteString("\n")
	return b.String()
}

// cfloat is printf's %<width>.2f, including glibc's inf and nan spellings
// (a division by zero time or count gives those in the C tools too).
func cfloat(v float64, width int) string {
	var s string
	switch {
	case math.IsInf(v, 1):
		s = "inf"
	case math.IsInf(v, -1):
		s = "-inf"
	case math.IsNaN(v):
		s = "nan"
		if math.Signbit(v) {
			s = "-nan"
		}
	default:
		return fmt.Sprintf("%*.2f", width, v)
	}
	return fmt.Sprintf("%*s", width, s)
}

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
