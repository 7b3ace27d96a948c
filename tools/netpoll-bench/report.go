//go:build linux

package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// percentile returns the q-quantile (0..1) of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// printTable writes the side-by-side comparison.
func printTable(w io.Writer, o options, topology string, results []result) {
	fmt.Fprintf(w, "UDP ping-pong, %d-byte payload, %s; %d round trips measured after %d of warm-up.\n",
		o.size, topology, o.n, o.warmup)
	fmt.Fprintf(w, "%s. msg = one round trip (ping and pong). CPU and allocations: the whole process (both ends).\n", o.pin)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tp50\tp99\tp99.9\tmsg/s\tCPU/msg\tallocs/msg\tpasses/msg\tsleeps/msg\tresent\t")
	for _, r := range results {
		sorted := slices.Clone(r.rtts)
		slices.Sort(sorted)
		if r.timedOut || len(sorted) == 0 {
			fmt.Fprintf(tw, "%s\ttimed out after %d round trips\t\t\t\t\t\t\t\t%d\t\n", r.name, len(sorted), r.resent)
			continue
		}
		n := float64(len(sorted))
		passes, sleeps := "-", "-"
		if r.passes > 0 {
			passes = fmt.Sprintf("%.1f", float64(r.passes)/n)
			sleeps = fmt.Sprintf("%.2f", float64(r.parks)/n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%s\t%.2f\t%s\t%s\t%d\t\n", r.name,
			us(percentile(sorted, 0.50)), us(percentile(sorted, 0.99)), us(percentile(sorted, 0.999)),
			n/r.elapsed.Seconds(), us(time.Duration(float64(r.cpu)/n)),
			float64(r.allocs)/n, passes, sleeps, r.resent)
	}
	tw.Flush()
}
