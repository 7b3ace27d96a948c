package ratio

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	} {
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("Median sorted its argument: %v", xs)
	}
}

// Identical rounds on both sides: no spread, so the interval is the ratio.
func TestOfMediansNoSpread(t *testing.T) {
	iv, err := OfMedians([]float64{200, 200, 200}, []float64{100, 100, 100, 100})
	if err != nil {
		t.Fatal(err)
	}
	if iv != (Interval{2, 2, 2}) {
		t.Errorf("got %+v, want ratio and bounds all 2", iv)
	}
}

// Samples drawn from known distributions: the interval holds the true
// ratio, lies around the point estimate, and narrows as rounds are added.
func TestOfMediansCoversAndNarrows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(n int, mean float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = mean * (1 + 0.05*rng.NormFloat64())
		}
		return xs
	}
	const truth = 1.2
	width := func(n int) float64 {
		iv, err := OfMedians(draw(n, 120), draw(n, 100))
		if err != nil {
			t.Fatal(err)
		}
		if !(iv.Lo <= iv.Ratio && iv.Ratio <= iv.Hi) {
			t.Errorf("n=%d: ratio %v outside its interval %v", n, iv.Ratio, iv)
		}
		if !(iv.Lo < truth && truth < iv.Hi) {
			t.Errorf("n=%d: interval %v misses the true ratio %v", n, iv, truth)
		}
		return iv.Hi - iv.Lo
	}
	w5, w50 := width(5), width(50)
	if !(w50 < w5/2) {
		t.Errorf("interval width with 50 rounds %.4f, with 5 rounds %.4f: want it at least halved", w50, w5)
	}
	if w5 < 0.02 {
		t.Errorf("interval width with 5 rounds of 5 %% noise is %.4f: too narrow to be a 95 %% interval", w5)
	}
}

// Over many repetitions, a 95 % interval holds the true ratio in roughly
// 95 % of them (percentile bootstrap of medians of 15 rounds: a little
// under, never far off).
func TestOfMediansCoverageRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const trials, n = 200, 15
	hits := 0
	for range trials {
		num, den := make([]float64, n), make([]float64, n)
		for i := range n {
			num[i] = 130 * (1 + 0.1*rng.NormFloat64())
			den[i] = 100 * (1 + 0.1*rng.NormFloat64())
		}
		iv, err := OfMedians(num, den)
		if err != nil {
			t.Fatal(err)
		}
		if iv.Lo <= 1.3 && 1.3 <= iv.Hi {
			hits++
		}
	}
	if rate := float64(hits) / trials; rate < 0.85 || rate > 0.995 {
		t.Errorf("coverage %.3f over %d trials, want about 0.95", rate, trials)
	}
}

func TestOfMediansRepeats(t *testing.T) {
	num, den := []float64{10, 12, 11, 15, 9}, []float64{8, 9, 10, 8.5, 9.5}
	a, _ := OfMedians(num, den)
	b, _ := OfMedians(num, den)
	if a != b {
		t.Errorf("the same rounds gave %v and %v", a, b)
	}
}

func TestOfMediansSkipsFailedRuns(t *testing.T) {
	iv, err := OfMedians([]float64{2, math.NaN(), 2}, []float64{1, 1, math.Inf(1)})
	if err != nil || iv != (Interval{2, 2, 2}) {
		t.Errorf("got %v, %v; want 2 [2, 2]", iv, err)
	}
}

func TestOfMediansRejects(t *testing.T) {
	if _, err := OfMedians([]float64{1}, []float64{1, 2}); !errors.Is(err, ErrTooFew) {
		t.Errorf("one value on a side: %v, want ErrTooFew", err)
	}
	if _, err := OfMedians([]float64{1, math.NaN()}, []float64{1, 2}); !errors.Is(err, ErrTooFew) {
		t.Errorf("one finite value on a side: %v, want ErrTooFew", err)
	}
	if _, err := OfMedians([]float64{1, 2}, []float64{0, 1}); err == nil {
		t.Error("a zero in the denominator: no error")
	}
}

func TestIntervalFormat(t *testing.T) {
	iv := Interval{Ratio: 1.2, Lo: 1.14, Hi: 1.32}
	if got, want := iv.String(), "1.200 [1.140, 1.320]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := iv.HalfWidth(); math.Abs(got-0.1) > 1e-12 {
		t.Errorf("HalfWidth() = %v, want 0.1", got)
	}
}
