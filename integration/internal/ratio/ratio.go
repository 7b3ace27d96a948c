// Package ratio puts a confidence interval on the Go/C ratios the VM
// benchmarks print. A ratio of two medians from a handful of rounds says
// nothing about how far the next run may land; a percentile bootstrap of
// that same statistic does: resample each side's rounds with replacement,
// recompute the ratio of medians many times, and keep the middle 95 %.
// The resampling is seeded from the data itself, so the same rounds always
// print the same interval.
package ratio

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// Resamples is how many bootstrap replicates an interval is built from.
const Resamples = 10000

// Interval is a ratio of medians, numerator over denominator, with the
// bounds of its bootstrap 95 % confidence interval.
type Interval struct {
	Ratio  float64 // median(num) / median(den)
	Lo, Hi float64 // 2.5th and 97.5th percentiles of the bootstrap ratios
}

// ErrTooFew is returned when a side has fewer than two finite values:
// no spread can be estimated from one.
var ErrTooFew = errors.New("ratio: fewer than two finite values on a side")

// OfMedians returns median(num)/median(den) with its percentile bootstrap
// 95 % interval. NaN and infinite values (failed runs) are left out; each
// side needs two finite values, and the denominator's must not be zero.
func OfMedians(num, den []float64) (Interval, error) {
	num, den = finite(num), finite(den)
	if len(num) < 2 || len(den) < 2 {
		return Interval{}, fmt.Errorf("%w (%d and %d)", ErrTooFew, len(num), len(den))
	}
	if slices.Contains(den, 0) {
		return Interval{}, errors.New("ratio: a zero in the denominator's values")
	}
	rng := rand.New(rand.NewPCG(seed(num, den)))
	bn, bd := make([]float64, len(num)), make([]float64, len(den))
	reps := make([]float64, Resamples)
	for i := range reps {
		for j := range bn {
			bn[j] = num[rng.IntN(len(num))]
		}
		for j := range bd {
			bd[j] = den[rng.IntN(len(den))]
		}
		reps[i] = Median(bn) / Median(bd)
	}
	slices.Sort(reps)
	return Interval{
		Ratio: Median(num) / Median(den),
		Lo:    quantile(reps, 0.025),
		Hi:    quantile(reps, 0.975),
	}, nil
}

// Median is the middle value of xs, the mean of the two middle ones for
// an even count; NaN for none. xs is not changed.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile is the q-quantile of sorted by linear interpolation between
// the closest ranks.
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (pos-float64(i))*(sorted[i+1]-sorted[i])
}

func finite(xs []float64) []float64 {
	var out []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out = append(out, x)
		}
	}
	return out
}

// seed derives the generator's seed from the values, so that an interval
// is a function of the rounds alone.
func seed(num, den []float64) (uint64, uint64) {
	h := fnv.New64a()
	var b [8]byte
	for _, side := range [][]float64{num, den} {
		for _, x := range side {
			u := math.Float64bits(x)
			for k := range b {
				b[k] = byte(u >> (8 * k))
			}
			h.Write(b[:])
		}
		h.Write([]byte{0xff})
	}
	s := h.Sum64()
	return s, s ^ 0x9e3779b97f4a7c15
}

// HalfWidth is the interval's larger distance from the ratio, relative to
// it: 0.05 means the interval lies within ±5 %.
func (iv Interval) HalfWidth() float64 {
	return math.Max(iv.Ratio-iv.Lo, iv.Hi-iv.Ratio) / iv.Ratio
}

// String formats the interval as the benchmarks print it:
// "1.234 [1.180, 1.301]".
func (iv Interval) String() string {
	return fmt.Sprintf("%.3f [%.3f, %.3f]", iv.Ratio, iv.Lo, iv.Hi)
}
