package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/tools/internal/getopt"
)

// perftest's defaults and limits (perftest_parameters.h of 4.5).
const (
	defPort       = 18515
	defSizeBW     = 65536
	defSizeLat    = 2
	defSizeAtomic = 8
	defIters      = 1000
	defItersWB    = 5000
	defTxBW       = 128
	defTxLat      = 1
	defRxSend     = 512
	defRxRDMA     = 1
	defCQMod      = 100
	defQPTimeout  = 14
	defDuration   = 5
	defQKey       = 0x11111111
	maxSize       = 8388608
	ucMaxRx       = 16000
	minIter       = 5
	maxIter       = 100000000
	cqModLimit    = 8192 // above this size CQ moderation is turned off
	udAddition    = 40   // the GRH in front of a UD receive
	maxInline     = 912
)

// outputKind is --output: the whole report, or one number for scripts.
type outputKind int

const (
	outputFull outputKind = iota
	outputBandwidth
	outputMessageRate
	outputLatency
)

// testMethod is perftest's ctx_test_method.
type testMethod int

const (
	runRegular testMethod = iota
	runAll
	runInfinitely
)

// options are one run's parameters, after perftest's defaults and its
// force_dependecies adjustments.
type options struct {
	test       test
	server     string // the server's host; "" makes this end the server
	device     string
	ibPort     uint8
	gidIndex   int // -1: not given (perftest then picks one)
	port       int
	size       int
	sizeSet    bool
	iters      int
	txDepth    int
	rxDepth    int
	cqMod      int
	cqModSet   bool
	postList   int
	numQPs     int
	duplex     bool
	conn       qp.Type
	events     bool
	rdmaCM     bool // -R
	commRDMACM bool // -z
	outReads   int  // -o; 0: the device's maximum
	atomic     atomicKind
	mtu        int // -m in bytes; 0: the port's active MTU
	qpTimeout  uint8
	inline     int // -I; -1: not given
	noPeak     bool
	method     testMethod
	duration   int // -D in seconds; 0: iterations
	margin     int
	gbits      bool
	output     outputKind
	noVersions bool
	cycles     bool // -C
	histogram  bool // -H
	unsorted   bool // -U
	sl         uint8
	tclass     uint8
	hopLimit   uint8
	sourceIP   string // --source_ip: the address RDMA CM connects from
}

// durationMode says the run is timed (-D or --run_infinitely) rather than
// counted.
func (o *options) durationMode() bool { return o.duration > 0 }

// connName is perftest's connStr for the connection type.
func (o *options) connName() string {
	switch o.conn {
	case qp.UC:
		return "UC"
	case qp.UD:
		return "UD"
	}
	return "RC"
}

// Long-only options get runes outside any letter.
const (
	optReportGbits rune = 0x10000 + iota
	optRunInfinitely
	optOutput
	optDontXchgVersions
	optTclass
	optUseOldPostSend
	optRetryCount
	optPKeyIndex
	optSourceIP
)

var optionSpecs = []getopt.Spec{
	{Short: 'p', Long: "port", Arg: true},
	{Short: 'd', Long: "ib-dev", Arg: true},
	{Short: 'i', Long: "ib-port", Arg: true},
	{Short: 'm', Long: "mtu", Arg: true},
	{Short: 's', Long: "size", Arg: true},
	{Short: 'n', Long: "iters", Arg: true},
	{Short: 't', Long: "tx-depth", Arg: true},
	{Short: 'u', Long: "qp-timeout", Arg: true},
	{Short: 'S', Long: "sl", Arg: true},
	{Short: 'x', Long: "gid-index", Arg: true},
	{Short: 'a', Long: "all"},
	{Short: 'F', Long: "CPU-freq"},
	{Short: 'c', Long: "connection", Arg: true},
	{Short: 'q', Long: "qp", Arg: true},
	{Short: 'e', Long: "events"},
	{Short: 'I', Long: "inline_size", Arg: true},
	{Short: 'o', Long: "outs", Arg: true},
	{Short: 'z', Long: "comm_rdma_cm"},
	{Short: 'R', Long: "rdma_cm"},
	{Short: 'L', Long: "hop_limit", Arg: true},
	{Short: 'h', Long: "help"},
	{Short: 'r', Long: "rx-depth", Arg: true},
	{Short: 'b', Long: "bidirectional"},
	{Short: 'Q', Long: "cq-mod", Arg: true},
	{Short: 'N', Long: "noPeak"},
	{Short: 'V', Long: "version"},
	{Short: 'C', Long: "report-cycles"},
	{Short: 'H', Long: "report-histogrm"},
	{Short: 'U', Long: "report-unsorted"},
	{Short: 'A', Long: "atomic_type", Arg: true},
	{Short: 'l', Long: "post_list", Arg: true},
	{Short: 'D', Long: "duration", Arg: true},
	{Short: 'f', Long: "margin", Arg: true},
	{Short: optReportGbits, Long: "report_gbits"},
	{Short: optRunInfinitely, Long: "run_infinitely"},
	{Short: optOutput, Long: "output", Arg: true},
	{Short: optDontXchgVersions, Long: "dont_xchg_versions"},
	{Short: optTclass, Long: "tclass", Arg: true},
	{Short: optUseOldPostSend, Long: "use_old_post_send"},
	{Short: optRetryCount, Long: "retry_count", Arg: true},
	{Short: optPKeyIndex, Long: "pkey_index", Arg: true},
	{Short: optSourceIP, Long: "source_ip", Arg: true},
}

// errExit is a refusal already explained on stderr: exit 1, say nothing
// more.
var errExit = errors.New("exit")

// errHelp ends a run that printed help or the version: exit 0.
var errHelp = errors.New("help")

// cInt parses an integer as strtol(…, 0) does (decimal, 0x hex, 0 octal)
// and fails like perftest's CHECK_VALUE on trailing garbage.
func cInt(name, arg, typ string) (int, error) {
	v, err := strconv.ParseInt(arg, 0, 64)
	if err != nil {
		return 0, fmt.Errorf(" %s argument %s should be %s", name, arg, typ)
	}
	return int(v), nil
}

func cIntRange(name, arg string, lo, hi int) (int, error) {
	v, err := cInt(name, arg, "int")
	if err != nil {
		return 0, err
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf(" %s should be between %d and %d", name, lo, hi)
	}
	return v, nil
}

// parseOptions reads a command line (without the program name) the way
// perftest 4.5's parser does for t, with its defaults, its refusals and its
// force_dependecies. Help and version go to stdout (errHelp); refusals
// are returned worded like perftest's.
func parseOptions(t test, args []string, stdout io.Writer) (*options, error) {
	o := &options{
		test: t, ibPort: 1, gidIndex: -1, port: defPort, iters: defIters,
		cqMod: defCQMod, postList: 1, numQPs: 1, conn: qp.RC, qpTimeout: defQPTimeout,
		inline: -1, atomic: atomicFetchAndAdd, margin: -1, hopLimit: 64,
	}
	switch {
	case t.verb == verbAtomic:
		o.size = defSizeAtomic
	case t.bw:
		o.size = defSizeBW
	default:
		o.size = defSizeLat
	}
	if t.verb == verbWrite && t.bw {
		o.iters = defItersWB
	}
	if t.bw {
		o.txDepth = defTxBW
	} else {
		o.txDepth = defTxLat
	}
	if t.verb == verbSend {
		o.rxDepth = defRxSend
	} else {
		o.rxDepth = defRxRDMA
	}
	opts, operands, err := getopt.Parse(optionSpecs, args)
	if err != nil {
		return nil, fmt.Errorf("%v", err)
	}
	for _, v := range opts {
		if err := o.set(v.Short, v.Arg, stdout); err != nil {
			return nil, err
		}
	}
	if len(operands) > 0 {
		o.server = operands[0]
	}
	return o, o.forceDependencies(stdout)
}

// set applies one option.
func (o *options) set(c rune, arg string, stdout io.Writer) (err error) {
	t := o.test
	switch c {
	case 'p':
		o.port, err = cInt("Port", arg, "int")
	case 'd':
		o.device = arg
	case 'i':
		var v int
		v, err = cIntRange("IB Port", arg, 1, 255)
		o.ibPort = uint8(v)
	case 'm':
		o.mtu, err = cInt("MTU", arg, "int")
		if err == nil {
			if _, ok := mtuFromBytes(o.mtu); !ok {
				return fmt.Errorf(" Invalid MTU - %d \n Please choose mtu from {256,512,1024,2048,4096}", o.mtu)
			}
		}
	case 's':
		factor := 1
		switch {
		case strings.HasSuffix(arg, "K"):
			arg, factor = strings.TrimSuffix(arg, "K"), 1024
		case strings.HasSuffix(arg, "M"):
			arg, factor = strings.TrimSuffix(arg, "M"), 1024*1024
		}
		v, _ := strconv.ParseInt(arg, 0, 64)
		o.size, o.sizeSet = int(v)*factor, true
		if o.size < 1 || o.size > (1<<32-1)/2 {
			return fmt.Errorf(" Message Size should be between %d and %d", 1, (1<<32-1)/2)
		}
	case 'n':
		o.iters, err = cIntRange("Iteration num", arg, minIter, maxIter)
	case 't':
		o.txDepth, err = cIntRange("Tx depth", arg, 1, 15000)
	case 'u':
		var v int
		v, err = cInt("QP Timeout", arg, "uint8_t")
		o.qpTimeout = uint8(v)
	case 'S':
		var v int
		if v, err = cInt("Service Level", arg, "uint8_t"); err == nil && v > 15 {
			return errors.New(" Only 15 Service levels")
		}
		o.sl = uint8(v)
	case 'x':
		o.gidIndex, err = cIntRange("Gid index", arg, 0, 64)
	case 'a':
		o.method = runAll
	case 'F': // no cpufreq check here: the clock is the kernel's
	case 'c':
		switch arg {
		case "RC":
			o.conn = qp.RC
		case "UC":
			if t.verb == verbRead || t.verb == verbAtomic {
				return errors.New(" UC connection not possible in READ/ATOMIC verbs")
			}
			o.conn = qp.UC
		case "UD":
			if t.verb != verbSend {
				return errors.New(" UD connection only possible in SEND verb")
			}
			o.conn = qp.UD
		case "RawEth", "XRC", "DC", "SRD":
			return fmt.Errorf(" %s connections are not supported by this perftest (rdma_rxe has none)", arg)
		default:
			return errors.New(" Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}")
		}
	case 'q':
		if !t.bw {
			return errors.New(" Multiple QPs only available on bw tests")
		}
		o.numQPs, err = cIntRange("num of Qps", arg, 1, 16384)
	case 'e':
		if t.verb == verbWrite {
			return errors.New(" Events feature not available on WRITE verb")
		}
		o.events = true
	case 'I':
		o.inline, err = cIntRange("Max inline", arg, 0, maxInline)
		if err == nil && (t.verb == verbRead || t.verb == verbAtomic) {
			return errors.New(" Inline feature not available on READ/Atomic verbs")
		}
	case 'o':
		o.outReads, err = cInt("Outstanding Reads", arg, "int")
		if err == nil && t.verb != verbRead && t.verb != verbAtomic {
			return errors.New(" Setting Outstanding reads only available on READ verb")
		}
	case 'z':
		o.commRDMACM = true
	case 'R':
		o.rdmaCM = true
	case 'L':
		var v int
		v, err = cIntRange("Hop Limit", arg, 0, 255)
		o.hopLimit = uint8(v)
	case optTclass:
		var v int
		v, err = cIntRange("Traffic class", arg, 0, 255)
		o.tclass = uint8(v)
	case 'h':
		printUsage(stdout, t)
		return errHelp
	case 'V':
		fmt.Fprintf(stdout, "Version: %s\n", wireVersion)
		return errHelp
	case 'r':
		o.rxDepth, err = cIntRange(" Rx depth", arg, 1, 16384)
		if err == nil && t.verb != verbSend && o.rxDepth > defRxRDMA {
			return errors.New(" On RDMA verbs rx depth can be only 1")
		}
	case 'b':
		if !t.bw {
			return errors.New(" Bidirectional is only available in BW test")
		}
		o.duplex = true
	case 'Q':
		o.cqMod, err = cIntRange("CQ moderation", arg, 1, 1024)
		o.cqModSet = true
	case 'N':
		o.noPeak = true
	case 'C':
		o.cycles = true
	case 'H':
		o.histogram = true
	case 'U':
		o.unsorted = true
	case 'A':
		if t.verb != verbAtomic {
			return errors.New(" You are not running the atomic_lat/bw test!\n To change the atomic action type, you must run one of the atomic tests")
		}
		switch arg {
		case atomicName[atomicCmpAndSwap]:
			o.atomic = atomicCmpAndSwap
		case atomicName[atomicFetchAndAdd]:
			o.atomic = atomicFetchAndAdd
		default:
			return errors.New(" Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}")
		}
	case 'l':
		o.postList, err = cInt("Send Post List size", arg, "int")
	case 'D':
		o.duration, err = cInt("Duration period", arg, "int")
		if err == nil && o.duration <= 0 {
			return errors.New(" Duration period must be positive")
		}
	case 'f':
		o.margin, err = cInt("Margin", arg, "int")
		if err == nil && o.margin < 0 {
			return errors.New(" Margin must be non-negative")
		}
	case optReportGbits:
		o.gbits = true
	case optRunInfinitely:
		o.method = runInfinitely
	case optOutput:
		switch arg {
		case "bandwidth":
			o.output = outputBandwidth
		case "message_rate":
			o.output = outputMessageRate
		case "latency":
			o.output = outputLatency
		default:
			return errors.New(" Invalid verbosity level output flag. Please use bandwidth, latency, message_rate")
		}
	case optDontXchgVersions:
		o.noVersions = true
	case optSourceIP:
		if _, err := parseIP(arg); err != nil {
			return err
		}
		o.sourceIP = arg
	case optUseOldPostSend, optRetryCount, optPKeyIndex:
		// accepted for command-line compatibility; nothing changes here
	}
	return err
}

// forceDependencies is perftest's force_dependecies for the options this
// tool has: depths clipped to the iterations, CQ moderation, the -a size,
// duration and run_infinitely rules, and the refusals.
func (o *options) forceDependencies(stdout io.Writer) error {
	t := o.test
	if o.method == runInfinitely {
		if o.duration == 0 {
			o.duration = defDuration
		}
	}
	if o.durationMode() {
		if o.margin < 0 {
			o.margin = o.duration / 4
		}
	}
	if !o.durationMode() {
		o.txDepth = min(o.txDepth, o.iters)
		if t.verb == verbSend {
			o.rxDepth = min(o.rxDepth, o.iters)
		}
		if (o.conn == qp.UD || o.conn == qp.UC) && o.rxDepth == defRxSend {
			o.rxDepth = min(o.iters, ucMaxRx)
		}
	}
	if o.size > cqModLimit && o.conn != qp.UD && o.method != runAll && !o.events {
		if !o.cqModSet {
			o.cqMod = 1
		} else if o.cqMod > 1 {
			fmt.Fprint(stdout, resultLine)
			fmt.Fprint(stdout, "Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n")
		}
	}
	o.cqMod = min(o.cqMod, o.txDepth)
	if t.verb == verbRead || t.verb == verbAtomic {
		o.inline = 0
	}
	if o.method == runAll {
		o.size = maxSize
	}
	if t.verb == verbAtomic && o.size != defSizeAtomic {
		fmt.Fprint(stdout, resultLine)
		fmt.Fprintln(stdout, "Message size cannot be changed for Atomic tests ")
		return errExit
	}
	if o.postList > 1 {
		if !t.bw {
			fmt.Fprint(stdout, resultLine)
			return errors.New("Post list is supported in BW tests only")
		}
		if !o.durationMode() && o.iters%o.postList != 0 {
			fmt.Fprint(stdout, resultLine)
			return errors.New("Number of iterations must be a multiple of post list size")
		}
		if !o.cqModSet {
			o.cqMod = o.postList
			fmt.Fprint(stdout, resultLine)
			fmt.Fprintln(stdout, "Post List requested - CQ moderation will be the size of the post list")
		} else if o.postList%o.cqMod != 0 {
			fmt.Fprint(stdout, resultLine)
			return errors.New("Post list size must be a multiple of CQ moderation")
		}
	}
	if o.durationMode() {
		o.noPeak = true
		if o.events {
			fmt.Fprint(stdout, resultLine)
			return errors.New("Duration mode doesn't work with events.")
		}
		if o.method == runAll {
			fmt.Fprint(stdout, resultLine)
			return errors.New("Duration mode currently doesn't support running on all sizes.")
		}
	}
	if o.rdmaCM {
		if o.conn == qp.UC {
			fmt.Fprint(stdout, resultLine)
			fmt.Fprintln(stdout, " UC is not supported in librdmacm")
			return errExit
		}
		o.commRDMACM = true
	}
	if t.verb == verbSend && t.bw && o.server == "" && !o.duplex {
		o.noPeak = true
	}
	if o.method == runInfinitely {
		o.noPeak = true
		if o.events {
			fmt.Fprint(stdout, resultLine)
			return errors.New(" run_infinitely does not support events feature yet.")
		}
		if !t.bw {
			fmt.Fprint(stdout, resultLine)
			return errors.New(" run_infinitely exists only in BW tests for now.")
		}
		if o.duplex && t.verb == verbSend {
			fmt.Fprint(stdout, resultLine)
			return errors.New(" run_infinitely mode is not supported in SEND Bidirectional BW test")
		}
	}
	// perftest's work-around for an odd rx_depth in SEND.
	if t.verb == verbSend && o.rxDepth%2 == 1 && o.method == runRegular {
		o.rxDepth++
	}
	if !o.durationMode() && o.iters > 20000 && t.bw {
		o.noPeak = true
	}
	if o.durationMode() && !(o.duration > 2*o.margin) {
		fmt.Fprint(stdout, resultLine)
		return errors.New("please check that DURATION > 2*MARGIN")
	}
	return nil
}

// parseIP reads --source_ip.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf(" Invalid source IP %q", s)
	}
	return a, nil
}
