package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// C's "%#0Nx": no prefix for zero, the prefix inside the width otherwise.
func TestCAltHex(t *testing.T) {
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{
		{0, 4, "0000"}, {0x80, 4, "0x80"}, {0x11, 6, "0x0011"}, {0xbf566, 6, "0xbf566"},
		{0x3fc, 8, "0x0003fc"}, {0x560244d9e000, 16, "0x00560244d9e000"},
	} {
		if got := cAltHex(c.v, c.width); got != c.want {
			t.Errorf("cAltHex(%#x, %d) = %q, want %q", c.v, c.width, got, c.want)
		}
	}
}

// The address lines as Debian's ib_read_bw printed them in the VM.
func TestPrintDest(t *testing.T) {
	o := &options{test: test{name: "ib_read_bw", verb: verbRead, bw: true}}
	var b bytes.Buffer
	printDest(&b, o, "local", dest{outReads: 0x80, qpn: 0x14, psn: 0xbf566, rkey: 0x45b, vaddr: 0x5594dc7f2000,
		gid: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 15: 1}})
	want := " local address: LID 0000 QPN 0x0014 PSN 0xbf566 OUT 0x80 RKey 0x00045b VAddr 0x005594dc7f2000\n" +
		" GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:99:00:01\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	o.test = test{name: "ib_atomic_bw", verb: verbAtomic, bw: true}
	printDest(&b, o, "remote", dest{qpn: 0x15, psn: 0x940e13})
	if first := strings.SplitN(b.String(), "\n", 2)[0]; first != " remote address: LID 0000 QPN 0x0015 PSN 0x940e13" {
		t.Fatalf("atomic line %q", first)
	}
	// Over RDMA CM the exchange's parameters say SEND: Debian's ib_write_bw
	// -R printed no RKey or VAddr in the VM.
	b.Reset()
	o.test, o.commRDMACM = test{name: "ib_write_bw", verb: verbWrite, bw: true}, true
	printDest(&b, o, "local", dest{qpn: 0x11, psn: 0x940e13, rkey: 0x45b, vaddr: 0x5594dc7f2000})
	if first := strings.SplitN(b.String(), "\n", 2)[0]; first != " local address: LID 0000 QPN 0x0011 PSN 0x940e13" {
		t.Fatalf("-R write line %q", first)
	}
}

// ib_write_lat prints relaxed ordering OFF (it sets disable_pcir), the
// other tests ON, as Debian's tools did in the VM.
func TestPrintTestInfoRelaxedOrder(t *testing.T) {
	for _, c := range []struct {
		t    test
		want string
	}{
		{test{name: "ib_write_lat", verb: verbWrite}, "OFF"},
		{test{name: "ib_write_bw", verb: verbWrite, bw: true}, "ON"},
		{test{name: "ib_send_lat", verb: verbSend}, "ON"},
	} {
		var b bytes.Buffer
		printTestInfo(&b, &options{test: c.t, numQPs: 1}, "rxe0", 3, 1, 1)
		if !strings.Contains(b.String(), " PCIe relax order: "+c.want+"\n") {
			t.Errorf("%s: want relax order %s in\n%s", c.t.name, c.want, b.String())
		}
	}
}

// A row formats as perftest's REPORT_FMT does (the ib_send_bw client row
// captured in the VM).
func TestPrintBWReport(t *testing.T) {
	var b bytes.Buffer
	printBWReport(&b, &options{}, bwReport{size: 4096, iters: 50, peak: 11.68, avg: 7.65, msgRate: 0.001958}, nil)
	want := " 4096       50               11.68              7.65   \t\t   0.001958\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

// The averages follow perftest's formula: MiB/s from size × iterations
// over the first post to the last completion, Mpps likewise; the peak is
// the best window between a post and a later completion.
func TestBWReportOf(t *testing.T) {
	o := &options{numQPs: 1, cqMod: 2, postList: 1}
	// 4 messages of 1 MiB posted at 0, 1, 2, 3 ms and completed (every
	// second) at 2 and 4 ms (the two-message windows take 2 ms).
	ms := int64(1e6)
	// Slots 0 and 2 stay unwritten, as with perftest.
	tm := &bwTimes{posted: []int64{ms, 2 * ms, 3 * ms, 4 * ms}, completed: []int64{0, 3 * ms, 0, 5 * ms}}
	r := bwReportOf(o, tm, 1<<20, 4)
	if r.avg != 1000 || r.msgRate != 0.001 {
		t.Fatalf("avg %v MiB/s, rate %v Mpps; want 1000 and 0.001", r.avg, r.msgRate)
	}
	// The best window: posted at 3 ms, completed at 5 ms, 2 messages: 1 ms each.
	if r.peak != 1000 {
		t.Fatalf("peak %v, want 1000", r.peak)
	}
	o.noPeak = true
	tm = &bwTimes{posted: []int64{ms}, completed: []int64{5 * ms}}
	if r := bwReportOf(o, tm, 1<<20, 4); r.peak != 0 || r.avg != 1000 {
		t.Fatalf("noPeak: %+v", r)
	}
}

// Latency: deltas between posts, halved for send/write; the two largest
// are left out of the median, average and tail; t_max is the largest kept.
func TestLatReportOf(t *testing.T) {
	o := &options{test: test{verb: verbSend}}
	// Deltas (µs): 10, 12, 14, 16, 100, 200 → halved 5, 6, 7, 8, 50, 100.
	posted := []int64{0}
	for _, d := range []int64{10, 12, 14, 16, 100, 200} {
		posted = append(posted, posted[len(posted)-1]+d*1000)
	}
	r := latReportOf(o, posted, make([]int64, len(posted)))
	if r.min != 5 || r.max != 50 || r.typical != 6.5 || r.avg != 6.5 {
		t.Fatalf("%+v: want min 5, max 50, typical 6.5, avg 6.5", r)
	}
}

// A report that cannot be written (stdout on a full disk) fails the run,
// naming the error; perftest, and this tool before, exited 0. So does a
// CPU profile that could not be written (pprof drops its write errors).
func TestReportWriteFails(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer full.Close()
	var errOut strings.Builder
	if st := run([]string{"/usr/bin/ib_write_lat", "-V"}, full, &errOut); st != 1 || !strings.Contains(errOut.String(), "perftest: writing the report: write /dev/full: no space left on device") {
		t.Errorf("status %d, stderr %q", st, errOut.String())
	}
	t.Setenv(envProfile, "/dev/full")
	tl := &tool{stderr: io.Discard}
	if err := tl.measure(func() error { return nil }); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "CPU profile /dev/full") {
		t.Errorf("measure with the profile on /dev/full: %v", err)
	}
}
