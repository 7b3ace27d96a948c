package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/tools/internal/errwriter"
	"github.com/pureverbs/pureverbs/uverbs"
)

// pageSize and cacheLine are what this side announces in check_sys_data;
// both sides then use the larger of each.
const (
	pageSize  = 4096
	cacheLine = 64
)

// tool is one run of a test: its options, writers, channel and verbs.
type tool struct {
	o      *options
	stdout io.Writer
	stderr io.Writer
	s      *session
	d      *device
	e      *end
	my     []dest
	rem    []dest
}

// runTest runs the test o describes and returns nil when it succeeded.
func runTest(o *options, stdout, stderr io.Writer) (err error) {
	t := &tool{o: o, stdout: stdout, stderr: stderr}
	if t.d, err = openDevice(o, stdout, stderr); err != nil {
		return err
	}
	defer func() {
		t.d.unwatch()
		err = errors.Join(err, t.d.ctx.Close())
	}()
	if o.test.verb == verbRead || o.test.verb == verbAtomic {
		fmt.Fprint(stdout, resultLine)
		fmt.Fprintln(stderr, "Device not recognized to implement inline feature. Disabling it")
	} else if o.inline >= 0 {
		fmt.Fprint(stdout, resultLine)
		fmt.Fprintln(stderr, "Device not recognized to implement inline feature. Disabling it")
		o.inline = 0
	} else {
		o.inline = 0
	}
	mtu, err := t.d.activeMTU(o)
	if err != nil {
		return err
	}
	if o.conn == qp.UD && o.size > mtuBytes(mtu) { // check_link
		if o.method == runAll {
			fmt.Fprintf(stderr, " Max msg size in UD is MTU %d\n Changing to this MTU\n", mtuBytes(mtu))
		}
		o.size = mtuBytes(mtu)
	}
	var x exchanger
	if o.server == "" && o.output == outputFull {
		fmt.Fprint(stdout, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	}
	switch {
	case o.commRDMACM && o.server == "":
		x, err = acceptCM(o.port)
	case o.commRDMACM:
		x, err = dialCM(o.server, o.port, o.sourceIP)
	case o.server == "":
		x, err = acceptExchanger(o.port)
	default:
		x, err = dialExchanger(o.server, o.port)
	}
	if err != nil {
		return fmt.Errorf("%w\n Unable to init the socket connection", err)
	}
	defer func() { err = errors.Join(err, x.Close()) }()
	t.s = &session{x: x, gidIndex: t.d.gid.Index}
	if o.test.verb == verbWrite && o.test.bw {
		time.Sleep(time.Second) // ib_write_bw sleeps here
	}
	agreed, err := t.s.agreeSystem(sysData{pageSize: pageSize, cacheLine: cacheLine, mtu: mtu}, !o.noVersions, stderr)
	if err != nil {
		return err
	}
	mtu = agreed.mtu
	if o.conn == qp.UD && o.size > mtuBytes(mtu) { // check_mtu
		if o.method != runAll && o.sizeSet {
			return errors.New(" Max message size in UD cannot be greater than MTU ")
		}
		fmt.Fprintf(stderr, " Max msg size in UD is MTU %d\n Changing to this MTU\n", mtuBytes(mtu))
		o.size = mtuBytes(mtu)
	}
	cycleSize, lineSize := agreed.pageSize, agreed.cacheLine
	if o.rdmaCM {
		t.e, err = t.connectCMQPs(func(on *uverbs.Context) (*end, error) {
			return newEnd(o, t.d, on, cycleSize, lineSize, mtu)
		})
	} else {
		t.e, err = newEnd(o, t.d, t.d.ctx, cycleSize, lineSize, mtu)
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, t.e.Close()) }()
	t.my = t.e.localDests()
	t.rem = make([]dest, len(t.my))
	if os.Getenv(envTarget) == "1" {
		t.e.clearTargets()
		defer t.e.reportTargets(stderr)
	}
	// The records and the header name the device and GID the QPs use: with
	// -R the route's, whatever -d said.
	t.s.gidIndex = t.e.gid.Index
	printTestInfo(stdout, o, t.e.on.Device().Name, mtu, t.e.gid.Index, t.d.outReads)
	switch {
	case o.test.verb == verbSend && o.test.bw:
		return t.sendBW()
	case o.test.bw:
		return t.rdmaBW()
	case o.test.verb == verbSend:
		return t.sendLat()
	default:
		return t.rdmaLat()
	}
}

// connect is ctx_connect, which -R leaves to the CM but for UD's address
// handle.
func (t *tool) connect() error {
	return t.e.connect(t.my, t.rem)
}

// runWait is how long a server waits for the client's whole run: the
// duration and the usual limit for a timed run, ten times the limit for a
// counted one, for ever with --run_infinitely.
func (t *tool) runWait() time.Duration {
	switch {
	case t.o.method == runInfinitely:
		return 0
	case t.o.durationMode():
		return time.Duration(t.o.duration)*time.Second + exchangeTimeout
	}
	return 10 * exchangeTimeout
}

// shakeAll trades every QP's record, filling t.rem; with print set it
// prints the peer's.
func (t *tool) shakeAll(print bool) error {
	rem, err := t.s.shakeRecords(t.my)
	if err != nil {
		return err
	}
	copy(t.rem, rem)
	if print {
		for _, d := range rem {
			printDest(t.stdout, t.o, "remote", d)
		}
	}
	return nil
}

// shake is one synchronising record exchange (QP 0's).
func (t *tool) shake() error {
	_, err := t.s.handShake(t.my[0])
	return err
}

func (t *tool) printLocal() {
	for _, d := range t.my {
		printDest(t.stdout, t.o, "local", d)
	}
}

// sizes are the message sizes of the run: 2 B up to the limit with -a,
// else -s.
func (t *tool) sizes(limitExp int) []int {
	if t.o.method != runAll {
		return []int{t.o.size}
	}
	var s []int
	for i := 1; i < limitExp; i++ {
		s = append(s, 1<<i)
	}
	return s
}

// allLimit is the exponent -a stops below: 2^23 bytes, for UD the MTU.
func (t *tool) allLimit() int {
	if t.o.conn == qp.UD {
		return log2(mtuBytes(t.e.mtu)) + 1
	}
	return 24
}

func log2(n int) int {
	e := 0
	for 1<<(e+1) <= n {
		e++
	}
	return e
}

// sendSetup is the start ib_send_bw and ib_send_lat share: one record per
// QP, RTR/RTS, a sync record, the remote records printed, events armed.
func (t *tool) sendSetup() error {
	if err := t.shakeAll(false); err != nil {
		return err
	}
	if err := t.connect(); err != nil {
		return err
	}
	if err := t.shake(); err != nil {
		return err
	}
	t.printLocal()
	if err := t.shakeAll(true); err != nil {
		return err
	}
	if err := t.armEvents(); err != nil {
		return err
	}
	return nil
}

// sendBW is ib_send_bw's main.
func (t *tool) sendBW() error {
	o := t.o
	client := o.server != ""
	if err := t.sendSetup(); err != nil {
		return err
	}
	printBWHeader(t.stdout, o)
	for _, size := range t.sizes(t.allLimit()) {
		r, err := newBWRun(t.e, t.rem, size)
		if err != nil {
			return err
		}
		if !client || o.duplex {
			if err := r.postReceives(); err != nil {
				return err
			}
		}
		if err := t.shake(); err != nil {
			return err
		}
		switch {
		case o.method == runInfinitely:
			return t.infinitely(r)
		case o.duplex:
			err = t.measure(r.bidirectional)
		case client:
			err = t.measure(r.client)
		default:
			err = t.measure(r.server)
		}
		if err != nil {
			return err
		}
		rep := r.report()
		if !o.duplex || o.durationMode() {
			printBWReport(t.stdout, o, rep, nil)
		}
		if o.duplex && !o.durationMode() {
			rem, err := t.s.exchangeReport(rep)
			if err != nil {
				return err
			}
			printBWReport(t.stdout, o, rep, &rem)
		}
		if o.method == runAll {
			if err := t.shake(); err != nil {
				return err
			}
		}
	}
	if o.output == outputFull {
		fmt.Fprint(t.stdout, resultLine)
	}
	return t.s.closeConnection(t.my[0])
}

// rdmaBW is ib_write_bw's, ib_read_bw's and ib_atomic_bw's main.
func (t *tool) rdmaBW() error {
	o := t.o
	client := o.server != ""
	if err := t.shakeAll(false); err != nil {
		return err
	}
	if err := t.connect(); err != nil {
		return err
	}
	t.printLocal()
	if err := t.shakeAll(true); err != nil {
		return err
	}
	if err := t.shake(); err != nil { // after RTR
		return err
	}
	printBWHeader(t.stdout, o)
	if !client && !o.duplex {
		// The half-duplex server waits for the client's run and prints the
		// client's report.
		t.s.x.setTimeout(t.runWait())
		err := t.shake()
		t.s.x.setTimeout(exchangeTimeout)
		if err != nil {
			return err
		}
		rem, err := t.s.exchangeReport(bwReport{})
		if err != nil {
			return err
		}
		printBWReport(t.stdout, o, rem, nil)
		if err := t.s.closeConnection(t.my[0]); err != nil {
			return err
		}
		if o.output == outputFull {
			fmt.Fprint(t.stdout, resultLine)
		}
		return nil
	}
	if err := t.armEvents(); err != nil {
		return err
	}
	limit := 24
	if o.test.verb == verbAtomic {
		limit = 0 // RUN_ALL runs once, like RUN_REGULAR
	}
	sizes := []int{o.size}
	if o.method == runAll && limit > 0 {
		sizes = t.sizes(limit)
	}
	var rep bwReport
	for _, size := range sizes {
		r, err := newBWRun(t.e, t.rem, size)
		if err != nil {
			return err
		}
		if o.duplex {
			if err := t.shake(); err != nil {
				return err
			}
		}
		if o.method == runInfinitely {
			return t.infinitely(r)
		}
		if err := t.measure(r.client); err != nil {
			return err
		}
		if o.duplex && o.method == runAll {
			if err := t.shake(); err != nil {
				return err
			}
		}
		rep = r.report()
		if !o.duplex {
			printBWReport(t.stdout, o, rep, nil)
		} else {
			rem, err := t.s.exchangeReport(rep)
			if err != nil {
				return err
			}
			printBWReport(t.stdout, o, rep, &rem)
		}
	}
	if o.output == outputFull {
		fmt.Fprint(t.stdout, resultLine)
	}
	if client && !o.duplex {
		if err := t.shake(); err != nil {
			return err
		}
		if _, err := t.s.exchangeReport(rep); err != nil { // the server's is not meant to be read
			return err
		}
	}
	return t.s.closeConnection(t.my[0])
}

// sendLat is ib_send_lat's main.
func (t *tool) sendLat() error {
	o := t.o
	if err := t.sendSetup(); err != nil {
		return err
	}
	printLatHeader(t.stdout, o)
	for _, size := range t.sizes(t.allLimit()) {
		l := newLatRun(t.e, t.rem[0], size)
		if err := l.postReceives(); err != nil {
			return err
		}
		if err := t.shake(); err != nil {
			return err
		}
		if err := t.measure(l.send); err != nil {
			return err
		}
		l.print(t.stdout)
	}
	if o.output == outputFull {
		fmt.Fprint(t.stdout, resultLine)
	}
	return t.s.closeConnection(t.my[0])
}

// rdmaLat is ib_write_lat's, ib_read_lat's and ib_atomic_lat's main.
func (t *tool) rdmaLat() error {
	o := t.o
	client := o.server != ""
	if err := t.shake(); err != nil {
		return err
	}
	if err := t.shakeAll(false); err != nil {
		return err
	}
	if err := t.connect(); err != nil {
		return err
	}
	t.printLocal()
	if err := t.shakeAll(true); err != nil {
		return err
	}
	if err := t.shake(); err != nil {
		return err
	}
	if o.test.verb != verbWrite && !client {
		// The read/atomic server only waits for the client to finish.
		t.s.x.setTimeout(t.runWait())
		err := t.s.closeConnection(t.my[0])
		if err == nil && o.output == outputFull {
			fmt.Fprint(t.stdout, resultLine)
		}
		return err
	}
	if err := t.armEvents(); err != nil {
		return err
	}
	printLatHeader(t.stdout, o)
	sizes := []int{o.size}
	if o.method == runAll && o.test.verb != verbAtomic {
		sizes = t.sizes(24)
	}
	for _, size := range sizes {
		l := newLatRun(t.e, t.rem[0], size)
		var err error
		if o.test.verb == verbWrite {
			err = t.measure(l.write)
		} else {
			err = t.measure(l.readAtomic)
		}
		if err != nil {
			return err
		}
		l.print(t.stdout)
	}
	if o.output == outputFull {
		fmt.Fprint(t.stdout, resultLine)
	}
	if o.test.verb == verbWrite {
		return nil // ib_write_lat ends without a closing exchange
	}
	return t.s.closeConnection(t.my[0])
}

// armEvents requests the first completion events (-e).
func (t *tool) armEvents() error {
	if !t.o.events {
		return nil
	}
	if err := t.e.sendCQ.ReqNotify(false); err != nil {
		return fmt.Errorf(" Couldn't request CQ notification: %w", err)
	}
	if err := t.e.recvCQ.ReqNotify(false); err != nil {
		return fmt.Errorf(" Couldn't request CQ notification: %w", err)
	}
	return nil
}

// infinitely is --run_infinitely: the client sends and the SEND server
// receives until killed, and each prints the bandwidth of every -D
// seconds as one row.
func (t *tool) infinitely(r *bwRun) error {
	o := t.o
	client := o.server != ""
	period := int64(o.duration) * int64(time.Second)
	winStart, winCount := now(), 0
	next := winStart + period
	counted := func() int {
		if client {
			return r.totC
		}
		return r.totR
	}
	r.stall.progress()
	for {
		r.yield.maybe()
		if client {
			for i := range r.e.qps {
				if _, err := r.sendSide(i); err != nil {
					return err
				}
			}
			if _, err := r.pollSends(0); err != nil {
				return err
			}
		} else if _, err := r.pollRecvs(nil); err != nil {
			return err
		}
		if ts := now(); ts >= next {
			c := counted()
			times := bwTimes{posted: []int64{winStart}, completed: []int64{ts}}
			printBWReport(t.stdout, o, bwReportOf(o, &times, r.size, c-winCount), nil)
			winStart, winCount, next = ts, c, ts+period
		}
		if r.stall.stalled() {
			return r.stallError("completed", counted(), counted()+1)
		}
	}
}

// Environment switches for tests: PERFTEST_MALLOCS=1 reports the heap
// allocations of each measured loop on stderr; PERFTEST_TARGET=1 zeroes
// every QP's target window before the test and reports on stderr what the
// peer left in it (bytes changed, the sum of its 8-byte words);
// PERFTEST_CPUPROFILE=<file> writes a CPU profile of the measured loops.
const (
	envMallocs = "PERFTEST_MALLOCS"
	envTarget  = "PERFTEST_TARGET"
	envProfile = "PERFTEST_CPUPROFILE"
	envTimeout = "PERFTEST_TIMEOUT"
)

// measure runs a measured loop, counting its heap allocations when
// PERFTEST_MALLOCS=1.
func (t *tool) measure(loop func() error) (err error) {
	if path := os.Getenv(envProfile); path != "" {
		f, ferr := os.Create(path)
		if ferr != nil {
			return ferr
		}
		// pprof drops its write errors; w keeps them.
		w := errwriter.New(f)
		if perr := pprof.StartCPUProfile(w); perr != nil {
			return errors.Join(perr, f.Close())
		}
		defer func() {
			pprof.StopCPUProfile()
			if perr := errors.Join(w.Err(), f.Close()); perr != nil {
				err = errors.Join(err, fmt.Errorf("perftest: CPU profile %s: %w", path, perr))
			}
		}()
	}
	if os.Getenv(envMallocs) != "1" {
		return loop()
	}
	before := loopAllocSites()
	err = loop()
	after := loopAllocSites()
	fmt.Fprintf(t.stderr, "perftest: %d heap allocations in the measured loop\n", allocTotal(after)-allocTotal(before))
	for site, c := range after {
		if d := c - before[site]; d != 0 {
			fmt.Fprintf(t.stderr, "perftest:   %d at %s\n", d, site)
		}
	}
	return err
}

// loopAllocSites counts the heap allocations so far whose call stack
// passes through a measured loop (a method of bwRun or latRun), from the
// memory profile with every allocation sampled (PERFTEST_MALLOCS sets that
// at start-up): the runtime's own allocations (a thread started while the
// loop sleeps in a system call, say) are not the loop's. They are counted
// by site: the innermost frame outside the runtime, "function file:line".
func loopAllocSites() map[string]int64 {
	runtime.GC()
	runtime.GC() // the profile is published a cycle late
	recs := make([]runtime.MemProfileRecord, 4096)
	for {
		n, ok := runtime.MemProfile(recs, true)
		if ok {
			recs = recs[:n]
			break
		}
		recs = make([]runtime.MemProfileRecord, n+1024)
	}
	sites := map[string]int64{}
	for i := range recs {
		frames := runtime.CallersFrames(recs[i].Stack())
		site := ""
		for {
			f, more := frames.Next()
			if site == "" && !strings.HasPrefix(f.Function, "runtime.") {
				site = fmt.Sprintf("%s %s:%d", f.Function, f.File, f.Line)
			}
			if strings.Contains(f.Function, ".(*bwRun).") || strings.Contains(f.Function, ".(*latRun).") {
				sites[site] += recs[i].AllocObjects
				break
			}
			if !more {
				break
			}
		}
	}
	return sites
}

// allocTotal sums loopAllocSites' counts.
func allocTotal(sites map[string]int64) int64 {
	var n int64
	for _, c := range sites {
		n += c
	}
	return n
}
