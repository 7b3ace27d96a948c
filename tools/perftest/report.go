package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// perftest's table lines and headers (perftest_parameters.h).
const (
	resultLine     = "---------------------------------------------------------------------------------------\n"
	resultFmt      = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	resultFmtG     = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	resultFmtLat   = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	resultFmtLatDu = " #bytes        #iterations       t_avg[usec]    tps average"
	latMeasureTail = 2
)

// cAltHex formats v as C's "%#0<width>x": zero-padded to width with the
// 0x prefix counted, and no prefix at all for zero.
func cAltHex(v uint64, width int) string {
	if v == 0 {
		return fmt.Sprintf("%0*d", width, 0)
	}
	h := strconv.FormatUint(v, 16)
	if pad := width - 2 - len(h); pad > 0 {
		h = strings.Repeat("0", pad) + h
	}
	return "0x" + h
}

// mtuBytes is MTU_SIZE of an MTU enum.
func mtuBytes(m int) int { return 128 << m }

// mtuFromBytes is the enum of an MTU in bytes.
func mtuFromBytes(n int) (int, bool) {
	for m := 1; m <= 5; m++ {
		if mtuBytes(m) == n {
			return m, true
		}
	}
	return 0, false
}

// printTestInfo is ctx_print_test_info for what this tool supports.
func printTestInfo(w io.Writer, o *options, devName string, mtu int, gidIndex int, outReads int) {
	if o.output != outputFull {
		return
	}
	t := o.test
	fmt.Fprint(w, resultLine)
	var b strings.Builder
	b.WriteString("                    ")
	b.WriteString(testName[t.verb] + " ")
	if t.verb == verbAtomic {
		b.WriteString(atomicName[o.atomic] + " ")
	}
	if t.bw {
		if o.duplex {
			b.WriteString("Bidirectional ")
		}
		if o.postList > 1 {
			b.WriteString("Post List ")
		}
		b.WriteString("BW ")
	} else {
		b.WriteString("Latency ")
	}
	b.WriteString("Test\n")
	fmt.Fprint(w, b.String())
	if o.events {
		fmt.Fprintf(w, " Test with events. Using %s_comp%d\n", devName, 0)
	}
	fmt.Fprintf(w, " Dual-port       : %s\t\tDevice         : %s\n", "OFF", devName)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : %s\n", o.numQPs, "IB")
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : %s\n", o.connName(), "OFF")
	// ib_write_lat turns relaxed ordering off: it polls the last byte of
	// the peer's write, which must not arrive before the rest.
	relaxed := "ON"
	if t.verb == verbWrite && !t.bw {
		relaxed = "OFF"
	}
	fmt.Fprintf(w, " PCIe relax order: %s\n", relaxed)
	fmt.Fprintf(w, " ibv_wr* API     : %s\n", "OFF")
	client := o.server != ""
	if client || o.duplex {
		fmt.Fprintf(w, " TX depth        : %d\n", o.txDepth)
	}
	if o.postList > 1 {
		fmt.Fprintf(w, " Post List       : %d\n", o.postList)
	}
	if t.verb == verbSend && (!client || o.duplex) {
		fmt.Fprintf(w, " RX depth        : %d\n", o.rxDepth)
	}
	if t.bw {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", o.cqMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", mtuBytes(mtu))
	fmt.Fprintf(w, " Link type       : %s\n", "Ethernet")
	if gidIndex >= 0 {
		fmt.Fprintf(w, " GID index       : %d\n", gidIndex)
	}
	if t.verb != verbRead && t.verb != verbAtomic {
		fmt.Fprintf(w, " Max inline data : %d[B]\n", max(o.inline, 0))
	} else {
		fmt.Fprintf(w, " Outstand reads  : %d\n", outReads)
	}
	onOff := map[bool]string{false: "OFF", true: "ON"}
	fmt.Fprintf(w, " rdma_cm QPs\t : %s\n", onOff[o.rdmaCM])
	method := "Ethernet"
	if o.commRDMACM {
		method = "rdma_cm"
	}
	fmt.Fprintf(w, " Data ex. method : %s", method)
	if o.rdmaCM && !client {
		fmt.Fprint(w, "\n"+resultLine)
		fmt.Fprint(w, " Waiting for client rdma_cm QP to connect\n")
		fmt.Fprint(w, " Please run the same command with the IB/RoCE interface IP")
	}
	fmt.Fprint(w, "\n"+resultLine)
}

// printDest is ctx_print_pingpong_data: the address line of one QP (with
// the outstanding reads for READ, the rkey and address for WRITE and READ)
// and its GID, whose bytes perftest prints in decimal. It takes the verb
// from the exchange's parameters, which over RDMA CM (-R, -z) are SEND's:
// then every test prints the bare line.
func printDest(w io.Writer, o *options, side string, d dest) {
	if o.output != outputFull {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, " %s address: LID %s QPN %s PSN %s", side, cAltHex(uint64(d.lid), 4), cAltHex(uint64(d.qpn), 6), cAltHex(uint64(d.psn), 6))
	verb := o.test.verb
	if o.commRDMACM {
		verb = verbSend
	}
	switch verb {
	case verbRead:
		fmt.Fprintf(&b, " OUT %s", cAltHex(uint64(d.outReads), 4))
		fallthrough
	case verbWrite:
		fmt.Fprintf(&b, " RKey %s VAddr %s", cAltHex(uint64(d.rkey), 8), cAltHex(d.vaddr, 16))
	}
	b.WriteString("\n")
	b.WriteString(" GID: ")
	for i, c := range d.gid {
		if i > 0 {
			b.WriteString(":")
		}
		fmt.Fprintf(&b, "%02d", c)
	}
	b.WriteString("\n")
	fmt.Fprint(w, b.String())
}

// printBWHeader prints the table's header line.
func printBWHeader(w io.Writer, o *options) {
	if o.output != outputFull {
		return
	}
	h := resultFmt
	if o.gbits {
		h = resultFmtG
	}
	fmt.Fprint(w, resultLine+h+"\n")
}

// printLatHeader prints the latency table's header line.
func printLatHeader(w io.Writer, o *options) {
	if o.output != outputFull {
		return
	}
	h := resultFmtLat
	if o.durationMode() {
		h = resultFmtLatDu
	}
	fmt.Fprint(w, resultLine+h+"\n")
}

// bwTimes are a bandwidth run's timestamps: when each request was posted
// and when the completions counting up to it arrived (perftest's
// tposted/tcompleted), or with noPeak only [0] of each: the first post
// and the last completion. The loops write stamps; the report reads
// nanoseconds (stampsToNanos).
type bwTimes struct {
	posted, completed []int64
}

// bwReportOf is print_report_bw's arithmetic: the average over the
// whole run, the best per-window rate (unless noPeak) and the message
// rate, for iters messages of size bytes per QP.
func bwReportOf(o *options, t *bwTimes, size, iters int) bwReport {
	const unitsPerSec = 1e9 // timestamps are nanoseconds
	n := iters
	if !o.durationMode() {
		n *= o.numQPs
	}
	format := 1048576.0
	if o.gbits {
		format = 125000000
	}
	loc := 0
	if !o.noPeak {
		loc = n - 1
	}
	sum := float64(t.completed[loc] - t.posted[0])
	r := bwReport{size: uint64(size), iters: uint64(n)}
	if sum <= 0 {
		return r
	}
	r.avg = float64(size) * float64(n) * unitsPerSec / (sum * format)
	r.msgRate = float64(n) * unitsPerSec / (sum * 1e6)
	if !o.noPeak && n > 0 {
		// perftest's cycles are unsigned: a completion slot never written
		// (0) gives a huge difference, never the best one.
		window := func(i, j int) uint64 {
			return uint64(t.completed[j]-t.posted[i]) / uint64(j-i+1)
		}
		opt := uint64(t.completed[0] - t.posted[0])
		step := max(o.cqMod, 1)
		for i := 0; i < n; i += max(o.postList, 1) {
			for j := roundUp(i+1, step) - 1; j < n; j += step {
				opt = min(opt, window(i, j))
			}
			if n%step != 0 {
				opt = min(opt, window(i, n-1))
			}
		}
		if opt > 0 {
			// perftest divides integers: size·units by delta·format.
			r.peak = float64(uint64(size)*uint64(unitsPerSec)) / float64(opt*uint64(format))
		}
	}
	return r
}

func roundUp(v, a int) int {
	if v%a == 0 {
		return v
	}
	return a * (v/a + 1)
}

// printBWReport is print_full_bw_report: this side's figures, plus the
// peer's when rem is not nil (bidirectional).
func printBWReport(w io.Writer, o *options, r bwReport, rem *bwReport) {
	peak, avg, rate := r.peak, r.avg, r.msgRate
	if rem != nil {
		peak += rem.peak
		avg += rem.avg
		rate += rem.msgRate
	}
	switch o.output {
	case outputBandwidth:
		fmt.Fprintf(w, "%f\n", avg)
		return
	case outputMessageRate:
		fmt.Fprintf(w, "%f\n", rate)
		return
	case outputLatency:
		return
	}
	if avg < 0.1 && o.gbits {
		fmt.Fprintf(w, " %-7d    %d           %-7.6f            %-7.6f            %-7.6f", r.size, r.iters, peak, avg, rate)
	} else {
		fmt.Fprintf(w, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f", r.size, r.iters, peak, avg, rate)
	}
	fmt.Fprint(w, "\n")
}

// latReport is print_report_lat's figures, in microseconds.
type latReport struct {
	min, max, typical, avg, stdev, p99, p999 float64
}

// latReportOf computes the latency figures from the post timestamps of
// iters round trips, nanoseconds or with -C the counter's ticks (C
// perftest's cycles); delta is scratch of iters-1 entries. Send and write
// halve the round trip (rtt_factor 2).
func latReportOf(o *options, posted []int64, delta []int64) latReport {
	n := len(posted) - 1
	delta = delta[:n]
	for i := range n {
		delta[i] = posted[i+1] - posted[i]
	}
	rtt := 2.0
	if o.test.verb == verbRead || o.test.verb == verbAtomic {
		rtt = 1
	}
	units := 1000.0 // nanoseconds per microsecond
	if o.cycles {
		units = 1
	}
	q := units * rtt
	slices.Sort(delta)
	m := n - latMeasureTail
	if m < 1 {
		m = 1
	}
	var median int64
	if (m-1)%2 != 0 {
		median = (delta[m/2] + delta[m/2-1]) / 2
	} else {
		median = delta[m/2]
	}
	var sum float64
	for i := range m {
		sum += float64(delta[i]) / q
	}
	avg := sum / float64(m)
	var sq float64
	for i := range m {
		// perftest squares int-truncated differences.
		d := int(avg - float64(delta[i])/q)
		sq += float64(int(math.Pow(float64(d), 2)))
	}
	i99 := int(math.Ceil(float64(m) * 0.99))
	i999 := int(math.Ceil(float64(m) * 0.999))
	at := func(i int) float64 { return float64(delta[min(i, n-1)]) / q }
	return latReport{
		min: at(0), max: at(m), typical: float64(median) / q, avg: avg,
		stdev: math.Sqrt(sq / float64(m)), p99: at(i99), p999: at(i999),
	}
}

// printLatReport prints one latency row.
func printLatReport(w io.Writer, o *options, size, iters int, r latReport) {
	if o.output == outputLatency {
		fmt.Fprintf(w, "%f\n", r.avg)
		return
	}
	if o.output != outputFull {
		return
	}
	fmt.Fprintf(w, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f", size, iters,
		r.min, r.max, r.typical, r.avg, r.stdev, r.p99, r.p999)
	fmt.Fprint(w, "\n")
}

// printLatDuration is print_report_lat_duration: the average latency
// and transactions per second over the sampled window.
func printLatDuration(w io.Writer, o *options, size, iters int, window int64) {
	rtt := 2.0
	if o.test.verb == verbRead || o.test.verb == verbAtomic {
		rtt = 1
	}
	us := float64(window) / 1000
	lat := us / rtt / float64(max(iters, 1))
	tps := float64(iters) / (float64(window) / 1e9)
	if o.output == outputLatency {
		fmt.Fprintf(w, "%f\n", lat)
		return
	}
	if o.output != outputFull {
		return
	}
	fmt.Fprintf(w, " %-7d       %d            %-7.2f        %-7.2f\n", size, iters, lat, tps)
}
