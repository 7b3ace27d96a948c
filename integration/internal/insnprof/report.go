package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// labelCost is what one iteration of a label's pair costs, per key.
type labelCost struct {
	label  string
	iters  [2]int // the two boots' iteration counts
	cost   map[key]float64
	idleNS float64 // the CPUs' idle time
}

// perIteration pairs each label's two boots: (b − a)/(nb − na) per key,
// so that the boot, the pair's set-up and its exit cancel out.
func perIteration(boots []*bootCount) ([]labelCost, error) {
	byLabel := map[string][]*bootCount{}
	var order []string
	for _, b := range boots {
		if byLabel[b.label] == nil {
			order = append(order, b.label)
		}
		byLabel[b.label] = append(byLabel[b.label], b)
	}
	var out []labelCost
	for _, l := range order {
		bs := byLabel[l]
		if len(bs) != 2 || bs[0].iters == bs[1].iters {
			return nil, fmt.Errorf("label %s: want two boots with different iteration counts, have %d", l, len(bs))
		}
		a, b := bs[0], bs[1]
		if a.iters > b.iters {
			a, b = b, a
		}
		n := float64(b.iters - a.iters)
		lc := labelCost{label: l, iters: [2]int{a.iters, b.iters}, cost: map[key]float64{}, idleNS: float64(b.idleUS-a.idleUS) * 1e3 / n}
		for k := range joinKeys(a.counts, b.counts) {
			lc.cost[k] = (float64(b.counts[k]) - float64(a.counts[k])) / n
		}
		out = append(out, lc)
	}
	return out, nil
}

func joinKeys(a, b map[key]uint64) map[key]struct{} {
	m := map[key]struct{}{}
	for k := range a {
		m[k] = struct{}{}
	}
	for k := range b {
		m[k] = struct{}{}
	}
	return m
}

// sum adds up the costs whose key match selects, by the key pick makes.
func (lc labelCost) sum(match func(key) bool, pick func(key) string) map[string]float64 {
	m := map[string]float64{}
	for k, v := range lc.cost {
		if match(k) {
			m[pick(k)] += v
		}
	}
	return m
}

// noise is the per-iteration cost below which a row is left out: the
// boot's own work differs between boots by about that much.
const noise = 0.5

func report(w io.Writer, lcs []labelCost, top int) {
	labels := make([]string, len(lcs))
	for i, lc := range lcs {
		labels[i] = lc.label
		fmt.Fprintf(w, "%s: boots of %d and %d iterations; the CPU idled %.0f ns per iteration (/proc/stat: 10 ms ticks)\n", lc.label, lc.iters[0], lc.iters[1], lc.idleNS)
	}
	fmt.Fprintf(w, "\nguest instructions per iteration, by place and object\n")
	places := []string{"client", "server", placeKernel, placeShared, placeOther}
	table(w, labels, lcs, 0, func(lc labelCost) map[string]float64 {
		m := lc.sum(func(key) bool { return true }, func(k key) string { return k.place })
		for obj, v := range lc.sum(func(key) bool { return true }, func(k key) string { return k.place + "\x00" + k.object }) {
			m[obj] = v
		}
		return m
	}, func(rows []string) []string {
		// Each place, then its objects by cost.
		var out []string
		for _, p := range places {
			if !slices.Contains(rows, p) {
				continue
			}
			out = append(out, p)
			var objs []string
			for _, r := range rows {
				if strings.HasPrefix(r, p+"\x00") {
					objs = append(objs, r)
				}
			}
			out = append(out, objs...)
		}
		return out
	})
	for _, p := range []string{"client", "server"} {
		for _, lc := range lcs {
			fmt.Fprintf(w, "\n%s %s: symbols by instructions per iteration\n", lc.label, p)
			m := lc.sum(func(k key) bool { return k.place == p }, func(k key) string { return k.object + " " + shortSymbol(k.symbol) })
			for _, r := range topRows(m, top) {
				fmt.Fprintf(w, "%10.1f  %s\n", m[r], r)
			}
		}
	}
	kernel := func(lc labelCost) map[string]float64 {
		return lc.sum(func(k key) bool { return k.place == placeKernel }, func(k key) string { return k.object + " " + k.symbol })
	}
	fmt.Fprintf(w, "\nkernel symbols by instructions per iteration\n")
	table(w, labels, lcs, top, kernel, nil)
	if len(lcs) != 2 {
		return
	}
	// Where two pairs run the same verbs, the kernel's work differs only
	// where the system calls or their arguments do.
	a, b := kernel(lcs[0]), kernel(lcs[1])
	diff := map[string]float64{}
	for r := range a {
		diff[r] = b[r] - a[r]
	}
	for r := range b {
		diff[r] = b[r] - a[r]
	}
	fmt.Fprintf(w, "\nkernel symbols by difference, %s less %s\n", lcs[1].label, lcs[0].label)
	for _, r := range topRows(diff, top) {
		fmt.Fprintf(w, "%10.1f  %s\n", diff[r], r)
	}
}

// table prints one row per name, one column per label; with top > 0 only
// the top rows by their largest column, else every row above noise in
// the order arrange gives.
func table(w io.Writer, labels []string, lcs []labelCost, top int, values func(labelCost) map[string]float64, arrange func([]string) []string) {
	cols := make([]map[string]float64, len(lcs))
	largest := map[string]float64{}
	for i, lc := range lcs {
		cols[i] = values(lc)
		for r, v := range cols[i] {
			largest[r] = max(largest[r], abs(v))
		}
	}
	rows := topRows(largest, top)
	if arrange != nil {
		rows = arrange(rows)
	}
	fmt.Fprintf(w, "%-40s", "")
	for _, l := range labels {
		fmt.Fprintf(w, " %10s", l)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		name := r
		if _, obj, ok := strings.Cut(r, "\x00"); ok {
			name = "  " + obj
		}
		fmt.Fprintf(w, "%-40s", name)
		for _, c := range cols {
			fmt.Fprintf(w, " %10.1f", c[r])
		}
		fmt.Fprintln(w)
	}
}

// topRows are m's names by value, largest first, above noise; at most
// top of them when top > 0.
func topRows(m map[string]float64, top int) []string {
	rows := slices.DeleteFunc(slices.Collect(maps.Keys(m)), func(r string) bool { return abs(m[r]) < noise })
	slices.SortFunc(rows, func(a, b string) int {
		if c := cmp.Compare(abs(m[b]), abs(m[a])); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if top > 0 && len(rows) > top {
		rows = rows[:top]
	}
	return rows
}

func abs(v float64) float64 { return max(v, -v) }

// shortSymbol drops what makes Go's symbols long without naming more:
// this module's path and generic instantiations' type arguments.
func shortSymbol(s string) string {
	s = strings.ReplaceAll(s, "github.com/pureverbs/pureverbs/", "")
	for {
		i := strings.Index(s, "[go.shape.")
		if i < 0 {
			return s
		}
		depth, j := 0, i
		for ; j < len(s); j++ {
			switch s[j] {
			case '[':
				depth++
			case ']':
				depth--
			}
			if depth == 0 {
				break
			}
		}
		if j == len(s) {
			return s // unbalanced: leave it
		}
		s = s[:i] + "[…]" + s[j+1:]
	}
}
