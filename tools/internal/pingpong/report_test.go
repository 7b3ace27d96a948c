package pingpong

import (
	"strings"
	"testing"
	"time"
)

// The expected lines are what ibv_rc_pingpong's printf calls print for the
// same microseconds, size and iteration count (its float arithmetic run
// through gcc on x86-64): 16777217 µs, for one, is 16777216 as a float.
func TestPrintSummaryMatchesC(t *testing.T) {
	for _, tc := range []struct {
		usec        int64
		size, iters int
		want        string
	}{
		{1234567, 4096, 1000, "8192000 bytes in 1.23 seconds = 53.08 Mbit/sec\n1000 iters in 1.23 seconds = 1234.57 usec/iter\n"},
		{1, 1, 1, "2 bytes in 0.00 seconds = 16.00 Mbit/sec\n1 iters in 0.00 seconds = 1.00 usec/iter\n"},
		{999, 65536, 7, "917504 bytes in 0.00 seconds = 7347.38 Mbit/sec\n7 iters in 0.00 seconds = 142.71 usec/iter\n"},
		{60000000, 100, 100000, "20000000 bytes in 60.00 seconds = 2.67 Mbit/sec\n100000 iters in 60.00 seconds = 600.00 usec/iter\n"},
		{16777217, 4096, 3, "24576 bytes in 16.78 seconds = 0.01 Mbit/sec\n3 iters in 16.78 seconds = 5592405.50 usec/iter\n"},
		{33554433, 2048, 1000, "4096000 bytes in 33.55 seconds = 0.98 Mbit/sec\n1000 iters in 33.55 seconds = 33554.43 usec/iter\n"},
		{246813, 4096, 200, "1638400 bytes in 0.25 seconds = 53.11 Mbit/sec\n200 iters in 0.25 seconds = 1234.06 usec/iter\n"},
	} {
		var sb strings.Builder
		// Sub-microsecond parts are dropped, as gettimeofday has none.
		PrintSummary(&sb, tc.size, tc.iters, time.Duration(tc.usec)*time.Microsecond+999*time.Nanosecond)
		if sb.String() != tc.want {
			t.Errorf("%d µs, %d B, %d iters:\ngot  %q\nwant %q", tc.usec, tc.size, tc.iters, sb.String(), tc.want)
		}
	}
}
