// Command rocev2-send plays the FPGA that feeds rogue's RoCEv2 server: it
// connects an RC QP to a server through the side channel (rdma-core's
// pingpong exchange) and streams RDMA SEND_WITH_IMM messages, with the
// channel in bits 7..0 of the immediate and a free-running ring position
// in bits 31..8: one counter for all channels, as surf's dispatcher stamps
// it (-ring channel: one per channel), wrapping at -w. Each payload carries a sequence number and a checksum
// (internal/framecheck) so that the receiver can count lost and corrupt
// frames. Back-pressure from the receiver arrives as RNR NAKs, retried
// forever (rnr_retry 7).
//
//	rocev2-send [-d rxe1] [-g 1] [-s 1024|MIN-MAX] [-n 1000] [-t 0] [-r 0] [-c 1] [-w 16777216] SERVER
//
// -op picks a malformed mode for tests: send (no immediate), write or
// write-imm (RDMA WRITE into -raddr/-rkey).
package main

import (
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

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/server/framecheck"
	"github.com/pureverbs/pureverbs/uverbs"
)

type options struct {
	dev      string
	gidIndex int
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
}

func parseOptions(args []string) (*options, error) {
	fs := flag.NewFlagSet("rocev2-send", flag.ContinueOnError)
	o := &options{}
	var size, op string
	var port, wrap uint
	fs.StringVar(&o.dev, "d", "rxe1", "RDMA device")
	fs.IntVar(&o.gidIndex, "g", 1, "local GID index (the RoCE v2 GID)")
	fs.UintVar(&port, "i", 1, "device port")
	fs.IntVar(&o.tcpPort, "p", server.DefaultTCPPort, "server's side-channel TCP port")
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
	s, err := openSender(o)
	if err != nil {
		return err
	}
	defer s.close()
	psn := rand.Uint32() & 0xffffff
	conn, srv, err := exchange(o, qp.Peer{QPN: s.qp.Num(), PSN: psn, GID: s.gid}, func(p qp.Peer) error {
		return s.connect(o, p, psn)
	})
	if err != nil {
		return err
	}
	// The connection stays open while streaming: the server ends this
	// sender's connection when it closes (a killed sender included).
	defer conn.Close()
	fmt.Printf("connected to %s: QPN %#06x, GID %v; sending %s\n", o.host, srv.QPN, srv.GID, describe(o))
	st, err := stream(o, s)
	el := st.elapsed.Seconds()
	fmt.Printf("sent %d frames, %d bytes in %.3f s: %.0f frames/s, %.2f MB/s\n",
		st.frames, st.bytes, el, float64(st.frames)/el, float64(st.bytes)/el/1e6)
	return err
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

type result struct {
	frames, bytes uint64
	elapsed       time.Duration
}

// stream posts the frames, keeping up to depth in flight, one doorbell per
// batch, and reaps completions; it stops at the first failed one. Slots
// are used in ring order, so that a completion for frame seq (with
// -signal N only every Nth is signalled, and the last) accounts for every
// frame before it.
func stream(o *options, s *sender) (result, error) {
	var st result
	slot := max(o.maxSize, 1)
	mem := s.buf.Bytes()
	depth := uint64(o.depth)
	wrs := make([]qp.SendWR, o.depth)
	sges := make([]uverbs.SGE, o.depth)
	sizes := make([]int, o.depth)
	wc := make([]cq.WC, o.depth)
	pos := make([]uint32, o.channels)
	span := uint64(o.maxSize - o.minSize + 1)
	signal := uint64(o.signal)
	start := time.Now()
	deadline := time.Time{}
	if o.duration > 0 {
		deadline = start.Add(o.duration)
	}
	var head, tail uint64 // next frame to post, oldest not known complete
	more := func() bool {
		if o.count != 0 && head >= o.count {
			return false
		}
		return deadline.IsZero() || head%64 != 0 || time.Now().Before(deadline)
	}
	for {
		// Post as many as there is room for (and the rate allows).
		k := 0
		for head-tail < depth && more() {
			if o.rate > 0 {
				due := start.Add(time.Duration(float64(head) / o.rate * float64(time.Second)))
				if d := time.Until(due); d > 0 {
					if k > 0 || head != tail {
						break
					}
					time.Sleep(d)
				}
			}
			i := head % depth
			n := o.minSize
			if span > 1 {
				n += int((head * 0x9e3779b97f4a7c15 >> 40) % span)
			}
			if o.fill || head < depth {
				framecheck.Fill(mem[int(i)*slot:int(i)*slot+n], head)
			}
			ch := int(head % uint64(o.channels))
			ring := 0
			if o.perChan {
				ring = ch
			}
			sge, err := s.mr.SGE(int(i)*slot, n)
			if err != nil {
				return st, err
			}
			sges[i] = sge
			wrs[k] = qp.SendWR{ID: head, Opcode: o.op, Imm: pos[ring]<<8 | uint32(o.chanBase+ch),
				SGEs: sges[i : i+1], RemoteAddr: o.raddr, RKey: o.rkey}
			if n == 0 {
				wrs[k].SGEs = nil
			}
			sizes[i] = n
			pos[ring] = (pos[ring] + 1) % o.wrap
			head++
			// Signal every Nth, the one that fills the queue, and the last.
			if head%signal == 0 || head-tail == depth || !more() {
				wrs[k].Flags = qp.Signaled
			}
			k++
		}
		if k > 0 {
			if err := s.qp.PostSend(wrs[:k]); err != nil {
				return st, fmt.Errorf("post send: %w", err)
			}
		}
		if head == tail && !more() {
			break
		}
		n, err := s.cq.Poll(wc)
		if err != nil {
			return st, fmt.Errorf("poll CQ: %w", err)
		}
		for _, c := range wc[:n] {
			if c.Status != cq.Success {
				st.elapsed = time.Since(start)
				return st, fmt.Errorf("send completion error: %v (status %d, vendor error %#x) after %d frames", c.Status, uint32(c.Status), c.VendorErr, st.frames)
			}
			for ; tail <= c.WRID; tail++ {
				st.frames++
				st.bytes += uint64(sizes[tail%depth])
			}
		}
	}
	st.elapsed = time.Since(start)
	return st, nil
}
