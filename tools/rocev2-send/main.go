// Command rocev2-send plays the FPGA that feeds rogue's RoCEv2 server: it
// connects an RC QP to a server through the side channel (rdma-core's
// pingpong exchange) and streams RDMA SEND_WITH_IMM messages, with the
// channel in bits 7..0 of the immediate and a free-running ring position
// in bits 31..8: one counter for all channels, as surf's dispatcher stamps
// it (-ring channel: one per channel), wrapping at -w. Each payload carries a sequence number and a checksum
// (server/framecheck) so that the receiver can count lost and corrupt
// frames. Back-pressure from the receiver arrives as RNR NAKs, retried
// forever (rnr_retry 7).
//
//	rocev2-send [-d rxe1] [-g ADDR|INDEX] [-s 1024|MIN-MAX] [-n 1000] [-t 0] [-r 0] [-c 1] [-w 16777216] [-reconnect 0] SERVER
//
// -g chooses the local GID by its IP address or its table index; by
// default it is the RoCE v2 GID of the device port's netdev, IPv4-mapped
// preferred (the order of a link's GID table is not fixed).
//
// -cm connects over RDMA CM instead (rdma_resolve_addr from the address of
// the -d/-g GID, rdma_connect to SERVER:-p with librdmacm's defaults).
//
// -reconnect N survives a failed connection (a send completing with an
// error: the server died, a blackout outlasted the retries, the server
// refused a frame): the sender connects again, at most N attempts in all,
// and goes on with its next frame, sequence number and ring position; it
// prints the frames that were in flight unacknowledged (each may or may
// not have arrived) and exits 0 when the stream finished.
//
// -op picks a malformed mode for tests: send (no immediate), write or
// write-imm (RDMA WRITE into -raddr/-rkey). -drop SEQ and -corrupt SEQ are
// for tests of a receiver's verdict: the stream skips sequence number SEQ
// (one frame lost, the frame count unchanged), or flips the last payload
// byte of frame SEQ after its checksum (one frame corrupt; payloads over 8
// bytes).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/tools/internal/gidflag"
)

type options struct {
	dev      string
	gid      *gidflag.Value
	ibPort   uint8
	tcpPort  int
	minSize  int
	maxSize  int
	count    uint64
	duration time.Duration
	rate     float64
	channels int
	chanBase int
	wrap     uint32
	perChan  bool
	mtu      int
	timeout  uint8
	depth    int
	fill     bool
	signal   int
	op       qp.SendOpcode
	raddr    uint64
	rkey     uint32
	host     string
	cm       bool
	// reconnect is how many connection attempts may follow failed
	// connections in all.
	reconnect int
	// dropSeq and corruptSeq are the test faults of -drop and -corrupt
	// (-1: none).
	dropSeq, corruptSeq int64
}

func parseOptions(args []string) (*options, error) {
	fs := flag.NewFlagSet("rocev2-send", flag.ContinueOnError)
	o := &options{gid: gidflag.New()}
	var size, op string
	var port, wrap uint
	fs.StringVar(&o.dev, "d", "rxe1", "RDMA device")
	fs.Var(o.gid, "g", gidflag.Usage)
	fs.UintVar(&port, "i", 1, "device port")
	fs.IntVar(&o.tcpPort, "p", server.DefaultTCPPort, "server's side-channel TCP port (with -cm: its RDMA CM port)")
	fs.IntVar(&o.reconnect, "reconnect", 0, "when the QP fails (a send completes with an error), connect again and go on with the next frame; at most this many attempts in all, 100 ms apart doubling up to 2 s")
	fs.BoolVar(&o.cm, "cm", false, "connect over RDMA CM (from the address of the -d/-g GID) instead of the side channel")
	fs.StringVar(&size, "s", "1024", "payload size in bytes, or MIN-MAX for sizes spread over a range")
	fs.Uint64Var(&o.count, "n", 1000, "frames to send (0: until -t)")
	fs.DurationVar(&o.duration, "t", 0, "send for this long (0: until -n)")
	fs.Float64Var(&o.rate, "r", 0, "frames per second (0: as fast as the receiver takes them)")
	fs.IntVar(&o.channels, "c", 1, "channels (1..256), round robin")
	fs.IntVar(&o.chanBase, "C", 0, "first channel: the channels are C..C+c-1")
	fs.UintVar(&wrap, "w", 1<<24, "ring positions wrap at this count (1..2^24)")
	var ring string
	fs.StringVar(&ring, "ring", "shared", "ring positions: shared (one counter for all channels, as surf's FPGA dispatcher) or channel (one per channel)")
	fs.IntVar(&o.mtu, "m", 0, "path MTU code 1..5 (0: the port's active MTU)")
	var timeout uint
	fs.UintVar(&timeout, "timeout", 14, "ACK timeout code 1..31: 4.096 µs × 2^code before a retransmission (14 ≈ 67 ms)")
	fs.IntVar(&o.depth, "q", 16, "send queue depth (the FPGA's is 16)")
	fs.IntVar(&o.signal, "signal", 1, "request a completion for every Nth send (and the last); the FPGA signals each")
	fs.BoolVar(&o.fill, "fill", true, "write the sequence number and checksum into every payload (off: each slot once, for benchmarks)")
	fs.StringVar(&op, "op", "send-imm", "operation: send-imm, send (no immediate), write, write-imm")
	fs.Uint64Var(&o.raddr, "raddr", 0, "remote address for -op write")
	var rkey uint
	fs.UintVar(&rkey, "rkey", 0, "remote key for -op write")
	fs.Int64Var(&o.dropSeq, "drop", -1, "for tests: skip this sequence number, so that a checking receiver counts one frame lost (-1: none)")
	fs.Int64Var(&o.corruptSeq, "corrupt", -1, "for tests: flip the last payload byte of the frame with this sequence number, so that a checking receiver counts it corrupt (-1: none)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: rocev2-send [options] SERVER")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return nil, errors.New("need the server's address")
	}
	o.host = fs.Arg(0)
	o.ibPort, o.rkey = uint8(port), uint32(rkey)
	if timeout < 1 || timeout > 31 {
		return nil, fmt.Errorf("-timeout %d: 1..31", timeout)
	}
	o.timeout = uint8(timeout)
	lo, hi, ok := strings.Cut(size, "-")
	var err error
	if o.minSize, err = strconv.Atoi(lo); err != nil || o.minSize < 0 {
		return nil, fmt.Errorf("-s %q: not a size", size)
	}
	o.maxSize = o.minSize
	if ok {
		if o.maxSize, err = strconv.Atoi(hi); err != nil || o.maxSize < o.minSize {
			return nil, fmt.Errorf("-s %q: not a range", size)
		}
	}
	if o.channels < 1 || o.chanBase < 0 || o.chanBase+o.channels > 256 {
		return nil, fmt.Errorf("-C %d -c %d: channels must lie in 0..255", o.chanBase, o.channels)
	}
	if wrap < 1 || wrap > 1<<24 {
		return nil, fmt.Errorf("-w %d: 1..2^24", wrap)
	}
	o.wrap = uint32(wrap)
	switch ring {
	case "shared":
	case "channel":
		o.perChan = true
	default:
		return nil, fmt.Errorf("-ring %q: shared or channel", ring)
	}
	if o.count == 0 && o.duration == 0 {
		return nil, errors.New("-n 0 needs -t")
	}
	if o.dropSeq < -1 || o.corruptSeq < -1 {
		return nil, fmt.Errorf("-drop %d -corrupt %d: a sequence number or -1", o.dropSeq, o.corruptSeq)
	}
	if (o.dropSeq >= 0 || o.corruptSeq >= 0) && !o.fill {
		return nil, errors.New("-drop and -corrupt need -fill")
	}
	if o.reconnect < 0 {
		return nil, fmt.Errorf("-reconnect %d: not a count", o.reconnect)
	}
	if o.depth < 1 {
		return nil, fmt.Errorf("-q %d: need at least 1", o.depth)
	}
	if o.signal < 1 || o.signal > o.depth {
		return nil, fmt.Errorf("-signal %d: 1..-q", o.signal)
	}
	switch op {
	case "send-imm":
		o.op = qp.SendWithImm
	case "send":
		o.op = qp.Send
	case "write":
		o.op = qp.RDMAWrite
	case "write-imm":
		o.op = qp.RDMAWriteWithImm
	default:
		return nil, fmt.Errorf("-op %q: send-imm, send, write or write-imm", op)
	}
	return o, nil
}

func main() {
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "rocev2-send:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "rocev2-send:", err)
		os.Exit(1)
	}
}

func run(o *options) error {
	z := newStreamer(o)
	attempts := 0
	for {
		s, conn, err := connect(o)
		if err != nil {
			// Only a connection that failed may be replaced: the first one
			// failing is an error of the set-up.
			if z.head == 0 || attempts >= o.reconnect {
				return err
			}
			attempts++
			wait := reconnectWait(attempts)
			fmt.Printf("reconnect %d of %d failed: %v; next in %v\n", attempts, o.reconnect, err, wait)
			time.Sleep(wait)
			continue
		}
		err = z.stream(s)
		if conn != nil {
			conn.Close()
		}
		s.close()
		var ce *completionError
		if err == nil || !errors.As(err, &ce) || attempts >= o.reconnect {
			report(z)
			return err
		}
		attempts++
		// A completion error names a frame in flight: there is a range.
		r := z.abandon()
		if !z.more() {
			// Nothing left to send: the failed frames are reported, as
			// after a reconnection.
			fmt.Printf("%v; frames %v unacknowledged, may be lost; the stream is over\n", err, r)
			report(z)
			return nil
		}
		fmt.Printf("%v; frames %v unacknowledged, may be lost; reconnecting (%d of %d), next frame %d\n", err, r, attempts, o.reconnect, z.head)
	}
}

// reconnectWait is how long a reconnection attempt waits after the
// previous one failed: 100 ms, doubling up to 2 s.
func reconnectWait(attempt int) time.Duration {
	return min(100*time.Millisecond<<min(attempt-1, 5), 2*time.Second)
}

// connect makes a sender and connects it, through the side channel (its
// TCP connection is returned: it stays open while streaming, so that the
// server ends this sender's connection when it closes, a killed sender
// included) or with -cm over RDMA CM.
func connect(o *options) (*sender, net.Conn, error) {
	if o.cm {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := dialSender(ctx, o)
		if err != nil {
			return nil, nil, err
		}
		fmt.Printf("connected over RDMA CM %v → %v: QPN %#06x, peer QPN %#06x; sending %s\n",
			s.cm.LocalAddr(), s.cm.RemoteAddr(), s.qp.Num(), s.cm.PeerParam().QPNum, describe(o))
		return s, nil, nil
	}
	s, err := openSender(o)
	if err != nil {
		return nil, nil, err
	}
	psn := rand.Uint32() & 0xffffff
	conn, srv, err := exchange(o, qp.Peer{QPN: s.qp.Num(), PSN: psn, GID: s.gid}, func(p qp.Peer) error {
		return s.connect(o, p, psn)
	})
	if err != nil {
		return nil, nil, errors.Join(err, s.close())
	}
	fmt.Printf("connected to %s: QPN %#06x, GID %v; sending %s\n", o.host, srv.QPN, srv.GID, describe(o))
	return s, conn, nil
}

// report prints what was sent: the frames seen acknowledged, and after
// reconnections the frames whose connection failed before they were.
func report(z *streamer) {
	el := z.elapsed.Seconds()
	fmt.Printf("sent %d frames, %d bytes in %.3f s: %.0f frames/s, %.2f MB/s\n",
		z.frames, z.bytes, el, float64(z.frames)/el, float64(z.bytes)/el/1e6)
	if len(z.unacked) > 0 {
		fmt.Printf("unacknowledged when a connection failed: %s\n", z.unackedSummary())
	}
}

func describe(o *options) string {
	size := strconv.Itoa(o.minSize)
	if o.maxSize != o.minSize {
		size += "-" + strconv.Itoa(o.maxSize)
	}
	n := strconv.FormatUint(o.count, 10) + " frames"
	if o.count == 0 {
		n = o.duration.String()
	}
	return fmt.Sprintf("%s of %s bytes on %d channel(s), op %v", n, size, o.channels, o.op)
}

// exchange dials the server, sends our record, reads the server's, lets
// connect move the QP, and says "done". It returns the open connection.
func exchange(o *options, me qp.Peer, connect func(qp.Peer) error) (net.Conn, qp.Peer, error) {
	addr := net.JoinHostPort(o.host, strconv.Itoa(o.tcpPort))
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, qp.Peer{}, err
	}
	fail := func(err error) (net.Conn, qp.Peer, error) {
		conn.Close()
		return nil, qp.Peer{}, err
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	rec, _ := me.MarshalText()
	if _, err := conn.Write(append(rec, 0)); err != nil {
		return fail(fmt.Errorf("send record: %w", err))
	}
	var in [qp.PeerRecordLen]byte
	if _, err := io.ReadFull(conn, in[:]); err != nil {
		return fail(fmt.Errorf("read server record: %w", err))
	}
	var srv qp.Peer
	if err := srv.UnmarshalText(in[:]); err != nil {
		return fail(err)
	}
	if err := connect(srv); err != nil {
		return fail(err)
	}
	if _, err := conn.Write([]byte("done\x00")); err != nil {
		return fail(fmt.Errorf("send done: %w", err))
	}
	conn.SetDeadline(time.Time{})
	return conn, srv, nil
}
