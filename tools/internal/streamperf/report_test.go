package streamperf

import (
	"testing"
	"time"
)

// The header as rstream.c's printf("%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n",
// "name", "bytes", "xfers", "iters", "total", "time", "Gb/sec",
// "usec/xfer") lays it out.
func TestHeader(t *testing.T) {
	want := "name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n"
	if Header != want {
		t.Errorf("header\n%q\nwant\n%q", Header, want)
	}
}

func TestSizeStr(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 64: "64", 1000: "1000", 1023: "1023", 1024: "1k", 1536: "1.5k",
		4096: "4k", 10 * 1024: "10k", 10*1024 + 512: "10k", 1000000: "976k", 1 << 20: "1m", 3 << 19: "1.5m",
		8192000: "7.8m", 1 << 30: "1g", 5 << 29: "2.5g", 100 << 30: "100g"} {
		if got := SizeStr(in); got != want {
			t.Errorf("SizeStr(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestCntStr(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1k", 1999: "1k", 100000: "100k", 1e6: "1m",
		25e8: "2b"} {
		if got := CntStr(in); got != want {
			t.Errorf("CntStr(%d) = %q, want %q", in, got, want)
		}
	}
}

// Result lines worked out by hand from show_perf's format, "%-10s" name,
// "%-8s" size, transfers, iterations and total, then "%8.2fs%10.2f%11.2f"
// of seconds, Gb/sec and usec per transfer (a transfer each way counts
// twice). 2^24+1 microseconds shows the single-precision float C keeps
// them in: per transfer it prints 8388608.00, not 8388608.50. A zero time
// divides to glibc's inf.
func TestPerfLine(t *testing.T) {
	for _, tc := range []struct {
		test    Test
		elapsed time.Duration
		want    string
	}{
		{Test{"custom", 4096, 100, 10}, 53 * time.Millisecond,
			"custom    4k      100     10      7.8m        0.05s      1.24      26.50\n"},
		{Test{"64_lat", 64, 1, 100000}, 3812345678 * time.Nanosecond,
			"64_lat    64      1       100k    12m         3.81s      0.03      19.06\n"},
		{Test{"1m_bw", 1 << 20, 100, 1}, 1500 * time.Millisecond,
			"1m_bw     1m      100     1       200m        1.50s      1.12    7500.00\n"},
		{Test{"custom", 64, 1, 1}, (1<<24 + 1) * time.Microsecond,
			"custom    64      1       1       128        16.78s      0.00 8388608.00\n"},
		{Test{"custom", 64, 200, 5}, 0,
			"custom    64      200     5       125k        0.00s       inf       0.00\n"},
	} {
		if got := PerfLine(tc.test, tc.elapsed); got != tc.want {
			t.Errorf("PerfLine(%+v, %v)\n got %q\nwant %q", tc.test, tc.elapsed, got, tc.want)
		}
	}
}

// The default runs are the C tools': latency tests (one transfer each way,
// size_to_count iterations) on one connection at -i's inline size, then
// bandwidth tests (that many transfers, one iteration) on another with
// inline 0; -S all adds the sizes between.
func TestPlan(t *testing.T) {
	o := &Options{Inline: 32}
	p := o.Plan()
	if len(p) != 2 || p[0].Inline != 32 || p[1].Inline != 0 {
		t.Fatalf("plan %+v", p)
	}
	wantLat := []Test{{"64_lat", 64, 1, 100000}, {"4k_lat", 4096, 1, 10000}, {"64k_lat", 65536, 1, 1000}, {"1m_lat", 1 << 20, 1, 100}}
	wantBW := []Test{{"64_bw", 64, 100000, 1}, {"4k_bw", 4096, 10000, 1}, {"64k_bw", 65536, 1000, 1}, {"1m_bw", 1 << 20, 100, 1}}
	if !equalTests(p[0].Tests, wantLat) || !equalTests(p[1].Tests, wantBW) {
		t.Errorf("plan %+v", p)
	}
	if n := o.BufferLen(); n != 1<<20 {
		t.Errorf("buffer %d, want 1 MiB", n)
	}
	o.AllSizes = true
	p = o.Plan()
	if len(p[0].Tests) != 33 || p[0].Tests[2] != (Test{"192_lat", 192, 1, 100000}) || p[1].Tests[32] != (Test{"6m_bw", 6 << 20, 100, 1}) {
		t.Errorf("-S all: %+v", p)
	}
	o = &Options{Custom: true, Size: 8, Count: 3, Iterations: 2, Inline: 0}
	p = o.Plan()
	if len(p) != 1 || p[0].Inline != -1 || !equalTests(p[0].Tests, []Test{{"custom", 8, 3, 2}}) {
		t.Errorf("custom plan %+v", p)
	}
	if n := o.BufferLen(); n != SyncSize {
		t.Errorf("buffer %d, want the sync's 16", n)
	}
}

func equalTests(a, b []Test) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
