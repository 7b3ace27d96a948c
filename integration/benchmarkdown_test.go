//go:build integration

package integration

import (
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/integration/internal/benchmd"
	"github.com/pureverbs/pureverbs/integration/internal/ratio"
)

// benchMarkdown prints a bench's Markdown table as section name plus the
// kernel's series (package benchmd: between <!-- bench:name-6_1 begin -->
// and end markers, headed by commit, kernel, mode and date) when
// RXEVM_BENCH_MARKDOWN=1 asks; the make bench targets set it and splice
// the section into the tool's README, which keeps a table per kernel. The
// commit comes from the host in RXEVM_BENCH_COMMIT: the guest has no git.
func benchMarkdown(name, table string) error { return writeBenchMarkdown(os.Stdout, name, table) }

// kernelSeries is a release's major and minor number as a section name
// takes them ("6.12.57+deb13-amd64" is "6_12"), "" for one that does not
// start so.
func kernelSeries(release string) string {
	m := kernelSeriesRE.FindStringSubmatch(release)
	if m == nil {
		return ""
	}
	return m[1] + "_" + m[2]
}

var kernelSeriesRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

func writeBenchMarkdown(w io.Writer, name, table string) error {
	if os.Getenv("RXEVM_BENCH_MARKDOWN") != "1" {
		return nil
	}
	var uts unix.Utsname
	kernel := ""
	if err := unix.Uname(&uts); err == nil {
		kernel = unix.ByteSliceToString(uts.Release[:])
	}
	if series := kernelSeries(kernel); series != "" {
		name += "-" + series
	}
	sec, err := benchmd.Section(name, benchmd.Meta{
		Commit: os.Getenv("RXEVM_BENCH_COMMIT"),
		Kernel: kernel,
		Mode:   benchMode(),
		Date:   time.Now().UTC().Format(time.DateOnly),
	}, table)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, sec)
	return err
}

// benchMode says how the measuring machine ran, so that every table and
// ratio line names the clock its times come from: in rxevm's VM (RXEVM=1)
// under KVM, under TCG on the host's clock ("TCG wall-clock": the host's
// load moves the figures), or under TCG with -icount (RXEVM_ICOUNT: the
// guest's time counts executed instructions, whatever the host's load);
// then the guest's clocksource (tsc: clock reads stay in the vDSO), or on
// the host itself (make test-host).
func benchMode() string {
	where := "host, no VM"
	if os.Getenv("RXEVM") == "1" {
		where = "QEMU TCG wall-clock"
		switch {
		case os.Getenv("RXEVM_KVM") == "1":
			where = "QEMU KVM"
		case os.Getenv("RXEVM_ICOUNT") != "":
			where = "QEMU TCG icount " + os.Getenv("RXEVM_ICOUNT") + " (guest time counts instructions)"
		}
	}
	clock := "clocksource unknown"
	if b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource"); err == nil {
		clock = "clocksource " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s, %s, %s, %d CPUs", where, clock, runtime.GOARCH, runtime.NumCPU())
}

// benchNoPolling says why a polling end cannot be measured here, or ""
// when it can: on one vCPU it spins until the guest's timer tick lets
// rxe's kernel work run (8 ms per rc-pingpong iteration seen), and under
// -icount QEMU runs every vCPU on one host thread in turn, so a spinning
// vCPU holds it until its slice ends (10-18 ms per iteration seen with
// two vCPUs).
func benchNoPolling() string {
	switch {
	case os.Getenv("RXEVM_ICOUNT") != "":
		return "under -icount (RXEVM_ICOUNT) a polling end holds QEMU's one TCG thread until its slice ends"
	case runtime.NumCPU() == 1:
		return "on one vCPU a polling end waits for the timer tick before rxe's work runs"
	}
	return ""
}

// benchRatio formats median(num)/median(den) with its bootstrap 95 %
// interval ("1.149 [1.130, 1.160]"), as every Go/C ratio of the bench
// tables is printed; with fewer than two finite runs on a side only the
// ratio is known, and it says so.
func benchRatio(num, den []float64) string {
	iv, err := ratio.OfMedians(num, den)
	if err != nil {
		r := ratio.Median(finiteRuns(num)) / ratio.Median(finiteRuns(den))
		if math.IsNaN(r) {
			return "-"
		}
		return fmt.Sprintf("%.3f [no interval: under 2 runs]", r)
	}
	return iv.String()
}

// benchRatioFields is the interval as key=value fields for the
// machine-read ratio lines: "lo=1.130 hi=1.160", or "lo=NaN hi=NaN".
func benchRatioFields(num, den []float64) string {
	iv, err := ratio.OfMedians(num, den)
	if err != nil {
		return "lo=NaN hi=NaN"
	}
	return fmt.Sprintf("lo=%.3f hi=%.3f", iv.Lo, iv.Hi)
}

func finiteRuns(xs []float64) []float64 {
	var out []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out = append(out, x)
		}
	}
	return out
}

// The section a bench prints comes back out of its output as the table,
// headed by the commit the host passed and the guest's kernel; without
// RXEVM_BENCH_MARKDOWN=1 nothing is printed. Runs on the host too.
func TestBenchMarkdown(t *testing.T) {
	const table = "| size | Go | C |\n|---|---|---|\n| 64 B | 1 | 2 |\n"
	t.Setenv("RXEVM_BENCH_MARKDOWN", "")
	var out strings.Builder
	if err := writeBenchMarkdown(&out, "server", table); err != nil || out.Len() != 0 {
		t.Fatalf("without RXEVM_BENCH_MARKDOWN: %q, %v; want nothing", out.String(), err)
	}
	t.Setenv("RXEVM_BENCH_MARKDOWN", "1")
	t.Setenv("RXEVM_BENCH_COMMIT", "0123abcd")
	if err := writeBenchMarkdown(&out, "server", table); err != nil {
		t.Fatal(err)
	}
	sections, err := benchmd.Extract(strings.NewReader("--- PASS\n" + out.String() + "ok\n"))
	if err != nil {
		t.Fatal(err)
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	name := "server-" + kernelSeries(release)
	head := fmt.Sprintf("<!-- bench:%s begin -->\nMeasured on commit 0123abcd, kernel %s, %s, ", name, release, benchMode())
	if sec := sections[name]; !strings.HasPrefix(sec, head) || !strings.HasSuffix(sec, ".\n\n"+table+"<!-- bench:"+name+" end -->\n") {
		t.Errorf("section %s:\n%s\nwant it to start %q and end with the table", name, sec, head)
	}
	for release, want := range map[string]string{"6.1.0-57-amd64": "6_1", "6.12.57+deb13-amd64": "6_12", "": "", "x6.1": ""} {
		if got := kernelSeries(release); got != want {
			t.Errorf("kernelSeries(%q) = %q, want %q", release, got, want)
		}
	}
}

// Every ratio comes with its interval; too few runs, or none, say so
// instead of printing a bare ratio as if it were known. Runs on the host.
func TestBenchRatio(t *testing.T) {
	for _, tc := range []struct {
		num, den []float64
		want     string
	}{
		{[]float64{2, 2, 2}, []float64{1, 1, 1}, "2.000 [2.000, 2.000]"},
		{[]float64{2, math.NaN()}, []float64{1, 1}, "2.000 [no interval: under 2 runs]"},
		{nil, []float64{1, 1}, "-"},
	} {
		if got := benchRatio(tc.num, tc.den); got != tc.want {
			t.Errorf("benchRatio(%v, %v) = %q, want %q", tc.num, tc.den, got, tc.want)
		}
	}
	num, den := []float64{3.3, 2.9, 3, 3.2, 2.7}, []float64{2, 2.1, 1.9, 2, 2.05}
	iv, err := ratio.OfMedians(num, den)
	if err != nil {
		t.Fatal(err)
	}
	if got := benchRatio(num, den); got != iv.String() || !(iv.Lo < iv.Ratio && iv.Ratio < iv.Hi) {
		t.Errorf("benchRatio with spread = %q, want %q with the ratio strictly inside", got, iv.String())
	}
	var lo, hi float64
	if _, err := fmt.Sscanf(benchRatioFields(num, den), "lo=%f hi=%f", &lo, &hi); err != nil || math.Abs(lo-iv.Lo) > 5e-4 || math.Abs(hi-iv.Hi) > 5e-4 {
		t.Errorf("benchRatioFields = %q (%v), want lo=%.3f hi=%.3f", benchRatioFields(num, den), err, iv.Lo, iv.Hi)
	}
	if got := benchRatioFields([]float64{3}, []float64{2, 2}); got != "lo=NaN hi=NaN" {
		t.Errorf("benchRatioFields with one run = %q", got)
	}
}

// The mode names the clock the figures were measured by.
func TestBenchMode(t *testing.T) {
	t.Setenv("RXEVM", "1")
	t.Setenv("RXEVM_KVM", "")
	t.Setenv("RXEVM_ICOUNT", "")
	if m := benchMode(); !strings.HasPrefix(m, "QEMU TCG wall-clock, clocksource ") {
		t.Errorf("plain TCG: %q", m)
	}
	t.Setenv("RXEVM_ICOUNT", "shift=0,sleep=off")
	if m := benchMode(); !strings.HasPrefix(m, "QEMU TCG icount shift=0,sleep=off (guest time counts instructions), clocksource ") {
		t.Errorf("icount: %q", m)
	}
}

// Polling rows are refused under -icount whatever the CPU count, and run
// on the host's clock with more than one CPU. Runs on the host.
func TestBenchNoPolling(t *testing.T) {
	t.Setenv("RXEVM_ICOUNT", "shift=0")
	if benchNoPolling() == "" {
		t.Error("under icount: polling allowed")
	}
	t.Setenv("RXEVM_ICOUNT", "")
	if got := benchNoPolling(); (got == "") != (runtime.NumCPU() > 1) {
		t.Errorf("without icount, %d CPUs: %q", runtime.NumCPU(), got)
	}
}
