package pingpong

import (
	"fmt"
	"io"
	"time"

	"github.com/pureverbs/pureverbs/tools/internal/inet6"
)

// PrintAddress prints one end's connection data as ibv_rc_pingpong does;
// label is "local address: " or "remote address:".
func PrintAddress(w io.Writer, label string, d Dest) { PrintAddressSep(w, label, ",", d) }

// PrintAddressSep is PrintAddress with sep before "GID": ibv_ud_pingpong
// prints its local address with ":" there.
func PrintAddressSep(w io.Writer, label, sep string, d Dest) {
	fmt.Fprintf(w, "  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n",
		label, d.LID, d.QPN, d.PSN, sep, inet6.Ntop(d.GID))
}

// PrintSummary prints the two result lines. The arithmetic follows the C
// tool's types, so the figures round the same way: the elapsed time is whole
// microseconds held in a float (float32), bytes are 2*size*iters, and the
// per-iteration time is a float division.
func PrintSummary(w io.Writer, size, iters int, elapsed time.Duration) {
	usec := float32(elapsed.Microseconds())
	bytes := int64(size) * int64(iters) * 2
	secs := float64(usec) / 1e6
	fmt.Fprintf(w, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, secs, float64(bytes)*8/float64(usec))
	fmt.Fprintf(w, "%d iters in %.2f seconds = %.2f usec/iter\n", iters, secs, float64(usec/float32(iters)))
}
