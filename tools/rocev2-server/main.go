// Command rocev2-server receives RoCEv2 frames with the server package: it
// listens on the side channel for senders (rocev2-send, or any program
// that speaks rdma-core's pingpong exchange) and, on the same port number
// in RDMA CM's TCP port space and on the address of its GID, for RDMA CM
// connects (rocev2-send -cm, any librdmacm program's plain RC connect),
// and counts, checks and optionally stores what arrives.
//
//	rocev2-server [-d rxe0] [-g ADDR|INDEX] [-p 18515] [-s 9000] [-r 256] [-n FRAMES] [-linger D] [-o FILE] [-allow CIDR,...] [--hold D] [--once]
//
// It takes any sender by default: an FPGA (surf's RoCEv2 engine), rdma-core
// style programs, rocev2-send. -allow restricts both ways in (side channel
// and RDMA CM) to senders from the prefixes given (a bare address is one
// host). On a terminal it shows a live progress line;
// at the end it prints a summary with frames, bytes, per-channel counts and
// what the ring positions in the immediates showed (gaps, positions
// missing, duplicates, wraps; -ring and -ring-size say how the sender
// counts: one position for all channels by default, as surf's dispatcher).
// With -check it also checks rocev2-send's payload format (sequence numbers
// and checksums) and prints "N lost, M corrupt"; the exit status is then 1
// when any frame was lost or corrupt. An FPGA user sets -ring-size to the
// AddrWrapCount programmed into the FPGA (usually -r).
//
// With -n it exits after that many frames, but not before the sender has
// ended its connection or -linger (2 s) has passed: until then the QP
// still acknowledges, so a sender whose last ACK was lost gets it from its
// retransmission. Destroyed at once, the QP would leave that sender
// retransmitting into nothing: for ever at retry count 7 (an FPGA's usual
// setting; rxe reads it as "retry without limit"), else until its QP fails
// with RETRY_EXC_ERR. Frames past -n are counted, not stored or checked.
//
// -o appends every payload to FILE. At the first write, flush or close
// error (a full disk) it stops storing, says so at once and in the
// summary (how many frames the file took), and the exit status is 1;
// receiving goes on.
//
// -g chooses the local GID by its IP address or its table index; by
// default it is the RoCE v2 GID of the device port's netdev, IPv4-mapped
// preferred (the order of a link's GID table is not fixed).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/server/framecheck"
	"github.com/pureverbs/pureverbs/tools/internal/gidflag"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

type options struct {
	cfg     server.Config
	tcpPort int
	frames  uint64
	out     string
	hold    time.Duration
	check   bool
	ring    string
	once    bool
	watch   bool
	quiet   bool
	limit   time.Duration
	linger  time.Duration
	allow   []netip.Prefix
}

func parseOptions(args []string) (*options, error) {
	fs := flag.NewFlagSet("rocev2-server", flag.ContinueOnError)
	o := &options{cfg: server.DefaultConfig("")}
	var port, mtu, rnr, ringSize uint
	fs.StringVar(&o.cfg.Device, "d", "rxe0", "RDMA device")
	gid := gidflag.New()
	fs.Var(gid, "g", gidflag.Usage)
	fs.UintVar(&port, "i", server.DefaultPort, "device port")
	fs.IntVar(&o.tcpPort, "p", server.DefaultTCPPort, "side-channel TCP port, and the RDMA CM port")
	fs.IntVar(&o.cfg.MaxPayload, "s", server.DefaultMaxPayload, "max payload: the size of one receive slot")
	fs.IntVar(&o.cfg.Depth, "r", server.DefaultDepth, "receive depth: the number of slots")
	fs.UintVar(&mtu, "m", 0, "path MTU code 1..5 (0: the port's active MTU)")
	fs.UintVar(&rnr, "rnr", server.DefaultMinRNRTimer, "min RNR timer code 1..31")
	fs.DurationVar(&o.cfg.SpinBudget, "spin", server.DefaultSpinBudget, "poll an idle CQ this long before parking")
	fs.Uint64Var(&o.frames, "n", 0, "exit after this many frames (0: run until interrupted)")
	fs.StringVar(&o.out, "o", "", "append every frame's payload to this file, in arrival order")
	fs.DurationVar(&o.hold, "hold", 0, "keep each frame this long before releasing it (a slow consumer)")
	fs.BoolVar(&o.check, "check", false, "check rocev2-send's payload format (sequence numbers, checksums); other senders' payloads count as corrupt")
	fs.StringVar(&o.ring, "ring", "shared", "how the sender counts ring positions: shared (one for all channels, as surf), channel (one per channel) or off")
	fs.UintVar(&ringSize, "ring-size", 0, "the count ring positions wrap at (the FPGA's AddrWrapCount; 0: unknown, any wrap to 0 accepted)")
	fs.DurationVar(&o.cfg.IdleTimeout, "idle", 0, "end a sender's connection after this long without a frame (0: never, for an FPGA that pauses)")
	fs.BoolVar(&o.once, "once", false, "exit when the first sender's connection ends")
	fs.BoolVar(&o.watch, "watch", true, "end a sender's connection when it closes the TCP connection")
	fs.BoolVar(&o.quiet, "q", false, "no progress line")
	fs.DurationVar(&o.limit, "timeout", 0, "give up after this long (exit status 1)")
	fs.DurationVar(&o.linger, "linger", 2*time.Second, "after -n frames, keep the sender's connection up this long, or until it ends it, so that it can retransmit a message whose ACK was lost")
	fs.Func("allow", "accept senders only from these addresses or prefixes, comma-separated (side channel and RDMA CM)", func(v string) error {
		allow, err := parseAllow(v)
		o.allow = append(o.allow, allow...)
		return err
	})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.cfg.GIDAddr, o.cfg.GIDIndex = gid.Addr, gid.Index // Index -1 is server.DefaultGIDIndex
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if port > 255 || mtu > 255 || rnr > 255 {
		return nil, errors.New("-i, -m and -rnr take small numbers")
	}
	o.cfg.Port, o.cfg.PathMTU, o.cfg.MinRNRTimer = uint8(port), uverbs.MTU(mtu), uint8(rnr)
	switch o.ring {
	case "shared":
		o.cfg.Ring = server.RingShared
	case "channel":
		o.cfg.Ring = server.RingPerChannel
	case "off":
		o.cfg.Ring = server.RingOff
	default:
		return nil, fmt.Errorf("-ring %q: shared, channel or off", o.ring)
	}
	if ringSize > 1<<24 {
		return nil, fmt.Errorf("-ring-size %d: at most 2^24", ringSize)
	}
	o.cfg.RingSize = uint32(ringSize)
	return o, nil
}

// parseAllow parses -allow: comma-separated prefixes (10.99.0.0/24) or
// addresses (10.99.0.2, one host).
func parseAllow(v string) ([]netip.Prefix, error) {
	var allow []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q: not a prefix (10.99.0.0/24) or an address", f)
			}
			allow = append(allow, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q: not a prefix (10.99.0.0/24) or an address", f)
		}
		allow = append(allow, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return allow, nil
}

func main() {
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "rocev2-server:", err)
		os.Exit(2)
	}
	ok, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rocev2-server:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// receiver is the frame handler: it runs on the server's receive thread.
type receiver struct {
	o       *options
	out     *store
	check   framecheck.Checker
	n       atomic.Uint64
	first   atomic.Int64 // unix ns of the first frame
	last    atomic.Int64
	enough  chan struct{}
	holding chan heldFrame
}

type heldFrame struct {
	f  server.Frame
	at time.Time
}

func (r *receiver) handle(f server.Frame) {
	now := time.Now().UnixNano()
	if r.first.Load() == 0 {
		r.first.Store(now)
	}
	r.last.Store(now)
	n := r.n.Add(1)
	if r.o.frames != 0 && n > r.o.frames {
		f.Release() // lingering: -n frames are in
		return
	}
	if r.out != nil {
		r.out.write(f.Data())
	}
	if r.o.check {
		r.check.Check(f.Data())
	}
	if r.o.frames != 0 && n == r.o.frames {
		close(r.enough)
	}
	if r.holding != nil {
		r.holding <- heldFrame{f, time.Now().Add(r.o.hold)}
		return
	}
	f.Release()
}

// linger returns when srv has no live connection, d has passed, a signal
// came or srv stopped. Meanwhile the connection's QP answers a
// retransmission of a message it already received with the ACK that was
// lost (rxe's responder does so for a duplicate PSN without delivering the
// message again).
func linger(srv *server.Server, d time.Duration, sig <-chan os.Signal) {
	if d <= 0 {
		return
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if st := srv.Stats(); st.SessionEnds >= st.Sessions {
			return
		}
		select {
		case <-deadline.C:
			return
		case <-sig:
			return
		case <-srv.Done():
			return
		case <-tick.C:
		}
	}
}

// release lets held frames go after their time, in order.
func (r *receiver) release() {
	for h := range r.holding {
		time.Sleep(time.Until(h.at))
		h.f.Release()
	}
}

func run(o *options) (bool, error) {
	r := &receiver{o: o, enough: make(chan struct{})}
	if o.out != "" {
		var err error
		r.out, err = openStore(o.out, func(err error) {
			clearLine(o)
			fmt.Fprintf(os.Stderr, "rocev2-server: -o: %v: storing stopped (receiving goes on; the exit status will be 1)\n", err)
		})
		if err != nil {
			return false, err
		}
		// Closed (and its error reported) below once the server stopped;
		// on the early error returns only the file is closed.
		defer r.out.close()
	}
	var releaser sync.WaitGroup
	if o.hold > 0 {
		r.holding = make(chan heldFrame, o.cfg.Depth)
		releaser.Add(1)
		go func() { defer releaser.Done(); r.release() }()
	}
	o.cfg.Handler = r.handle
	srv, err := server.New(o.cfg)
	if err != nil {
		return false, err
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(o.tcpPort))
	if err != nil {
		srv.Close()
		return false, err
	}
	fmt.Printf("rocev2-server: %s port %d GID %v, %d slots of %d bytes, listening on :%d\n",
		o.cfg.Device, o.cfg.Port, srv.GID(), srv.Depth(), srv.MaxPayload(), o.tcpPort)
	ctx, cancel := context.WithCancel(context.Background())
	logf := func(f string, a ...any) {
		clearLine(o)
		fmt.Fprintf(os.Stderr, "rocev2-server: "+f+"\n", a...)
	}
	serveErr := make(chan error, 1)
	go func() {
		serveErr <- srv.Serve(ctx, ln, server.ServeOptions{WatchPeer: o.watch, AllowedSenders: o.allow, Logf: logf})
	}()
	cmDone := serveCM(ctx, srv, o.tcpPort, server.CMOptions{AllowedSenders: o.allow, Logf: logf})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	var limit <-chan time.Time
	if o.limit > 0 {
		limit = time.After(o.limit)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ok := true
	start, lastFrames, lastBytes, lastShow := time.Now(), uint64(0), uint64(0), time.Now()
wait:
	for {
		select {
		case <-r.enough:
			linger(srv, o.linger, sig)
			break wait
		case <-sig:
			break wait
		case <-limit:
			clearLine(o)
			fmt.Fprintf(os.Stderr, "rocev2-server: timeout after %v\n", o.limit)
			ok = false
			break wait
		case err := <-serveErr:
			cancel()
			srv.Close()
			<-cmDone
			if e := srv.Err(); e != nil {
				err = e // why the server stopped (its device removed) rather than Serve's ErrClosed
			}
			return false, err
		case now := <-tick.C:
			st := srv.Stats()
			if o.once && st.SessionEnds > 0 {
				break wait
			}
			if d := now.Sub(lastShow); d >= time.Second && isTerminal(o) {
				fmt.Printf("\r%d frames  %.0f frames/s  %.2f MB/s  posted %d held %d    ",
					st.Frames, float64(st.Frames-lastFrames)/d.Seconds(), float64(st.Bytes-lastBytes)/d.Seconds()/1e6, st.Posted, st.Held)
				lastFrames, lastBytes, lastShow = st.Frames, st.Bytes, now
			}
		}
	}
	cancel()
	closeErr := srv.Close()
	<-serveErr
	<-cmDone
	if r.holding != nil {
		close(r.holding)
		releaser.Wait()
	}
	if r.out != nil && r.out.close() != nil {
		ok = false
	}
	clearLine(o)
	st := srv.Stats()
	summary(os.Stdout, o, r, &st, time.Since(start))
	if o.check && (r.check.Lost != 0 || r.check.Corrupt != 0) {
		ok = false
	}
	return ok, closeErr
}

func summary(w *os.File, o *options, r *receiver, st *server.Stats, total time.Duration) {
	el := time.Duration(r.last.Load() - r.first.Load()).Seconds()
	rate, mbs := 0.0, 0.0
	if el > 0 && st.Frames > 1 {
		rate = float64(st.Frames-1) / el
		mbs = float64(st.Bytes) / el / 1e6
	}
	var ch, gaps []string
	for i, n := range st.ChannelFrames {
		if n != 0 {
			ch = append(ch, fmt.Sprintf("%d:%d", i, n))
		}
		if g := st.ChannelRing[i].Gaps; g != 0 {
			gaps = append(gaps, fmt.Sprintf("%d:%d", i, g))
		}
	}
	fmt.Fprintf(w, "frames %d, bytes %d in %.3f s: %.0f frames/s, %.2f MB/s\n", st.Frames, st.Bytes, el, rate, mbs)
	fmt.Fprintf(w, "channels %s\n", strings.Join(ch, " "))
	if st.RingMode != server.RingOff {
		size := "unknown size"
		if st.RingSize != 0 {
			size = fmt.Sprintf("size %d", st.RingSize)
		}
		rg := st.Ring
		fmt.Fprintf(w, "ring (%v, %s): %d gaps (%d positions missing) %s; %d duplicates, %d wraps\n",
			st.RingMode, size, rg.Gaps, rg.Missing, strings.Join(gaps, " "), rg.Duplicates, rg.Wraps)
	}
	if st.HandlerPanics != 0 || st.StaleReleases != 0 {
		fmt.Fprintf(w, "handler panics %d, stale releases %d\n", st.HandlerPanics, st.StaleReleases)
	}
	fmt.Fprintf(w, "side channel: %d senders connected, %d exchanges failed (%d evicted to make room), %d connections refused\n", st.Exchanges, st.ExchangeFailures, st.Evicted, st.Refused)
	fmt.Fprintf(w, "rdma cm: %d senders connected, %d accepts failed (%d evicted to make room), %d requests refused\n", st.CMConnects, st.CMFailures, st.CMEvicted, st.CMRefused)
	var errs []string
	for s, n := range st.Errors {
		if n != 0 && cq.Status(s) != cq.WRFlushErr {
			errs = append(errs, fmt.Sprintf("%s:%d", statusName(s), n))
		}
	}
	fmt.Fprintf(w, "completion errors [%s], flushed at disconnect %d, bad opcode %d, bad length %d, bad wr_id %d; posted %d held %d low-water %d; parked %d times; senders %d\n",
		strings.Join(errs, " "), st.ErrorCount(cq.WRFlushErr), st.BadOpcode, st.BadLength, st.BadWRID, st.Posted, st.Held, st.PostedLowMark, st.Parks, st.Sessions)
	if r.out != nil {
		fmt.Fprintln(w, r.out.summary())
	}
	if o.check {
		c := &r.check
		if o.frames != 0 {
			c.Expect(o.frames)
		}
		dup := ""
		if c.Duplicate != 0 {
			dup = fmt.Sprintf(", %d duplicate", c.Duplicate)
		}
		fmt.Fprintf(w, "%d lost, %d corrupt%s\n", c.Lost, c.Corrupt, dup)
		if c.NLostRanges > 0 {
			fmt.Fprintf(w, "lost frames: %s\n", lostRanges(c))
		}
	}
}

// lostRanges names the frames c saw lost: its first ranges, and how many
// more were lost after them.
func lostRanges(c *framecheck.Checker) string {
	var b strings.Builder
	named := uint64(0)
	for i, r := range c.LostRanges[:c.NLostRanges] {
		if i > 0 {
			b.WriteByte(' ')
		}
		if r.First == r.Last {
			fmt.Fprint(&b, r.First)
		} else {
			fmt.Fprintf(&b, "%d..%d", r.First, r.Last)
		}
		named += r.Last - r.First + 1
	}
	if named < c.Lost {
		fmt.Fprintf(&b, " and %d more", c.Lost-named)
	}
	return b.String()
}

func statusName(s int) string { return cq.Status(s).String() }

func isTerminal(o *options) bool {
	if o.quiet {
		return false
	}
	_, err := unix.IoctlGetTermios(int(os.Stdout.Fd()), unix.TCGETS)
	return err == nil
}

func clearLine(o *options) {
	if isTerminal(o) {
		fmt.Print("\r\033[K")
	}
}
