// Command rping is rdma-core's rping in pure Go: the same options, wire
// format, validation and output, over pureverbs' RDMA CM (qp/rdmacm), so
// that either end can be the C tool.
//
//	rping -s [-vVdq] [-S size] [-C count] [-a addr] [-p port]
//	rping -c [-vVdq] [-S size] [-C count] [-I addr] -a addr [-p port]
//
// The client connects (RDMA CM, port 7174 by default) and, per ping, fills
// its start buffer with "rdma-ping-N: " and a cycling run of ASCII letters,
// SENDs the buffer's address, rkey and size (16 bytes, big-endian); the
// server RDMA READs it and answers with a 16-byte SEND; the client SENDs
// the address of its second buffer, into which the server RDMA WRITEs what
// it read, and answers again. With -V the client checks that the two
// buffers match; with -v each end prints the data. -C 0 (the default) pings
// until killed. -q makes the server build its own QP and hand it to the CM
// (rdma_init_qp_attr-driven transitions), on either side.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	"github.com/pureverbs/pureverbs/uverbs"
)

// rping's constants.
const (
	defaultPort = 7174
	defaultSize = 64
	minSize     = 26 // sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)
	maxSize     = 64*1024 - 1
	sqDepth     = 16 // RPING_SQ_DEPTH
	rqDepth     = 2
	infoLen     = 16 // struct rping_rdma_info
)

type options struct {
	server, client bool
	addr, source   string
	port           int
	size, count    int
	verbose        bool
	validate       bool
	debug          bool
	selfQP         bool
}

// optionSpecs are rping's getopt letters (rping.c: "a:I:p:C:S:scvVdq" of
// its set); options bundle and take attached arguments (-vV, -S65535).
var optionSpecs = []getopt.Spec{
	{Short: 's'}, {Short: 'c'}, {Short: 'v'}, {Short: 'V'}, {Short: 'd'}, {Short: 'q'},
	{Short: 'a', Arg: true}, {Short: 'I', Arg: true}, {Short: 'p', Arg: true},
	{Short: 'C', Arg: true}, {Short: 'S', Arg: true},
}

func parseOptions(args []string) (*options, error) {
	o := &options{port: defaultPort, size: defaultSize}
	vals, operands, err := getopt.Parse(optionSpecs, args)
	if err != nil {
		return nil, err
	}
	for _, v := range vals {
		switch v.Short {
		case 's':
			o.server = true
		case 'c':
			o.client = true
		case 'v':
			o.verbose = true
		case 'V':
			o.validate = true
		case 'd':
			o.debug = true
		case 'q':
			o.selfQP = true
		case 'a':
			o.addr = v.Arg
		case 'I':
			o.source = v.Arg
		case 'p':
			o.port = atoi(v.Arg)
		case 'C':
			o.count = atoi(v.Arg)
		case 'S':
			o.size = atoi(v.Arg)
		}
	}
	switch {
	case len(operands) != 0:
		return nil, fmt.Errorf("unexpected argument %q", operands[0])
	case o.server == o.client:
		return nil, errors.New("choose one of -s (server) and -c (client)")
	case o.client && o.addr == "":
		return nil, errors.New("the client needs -a addr")
	case o.size < minSize || o.size > maxSize:
		return nil, fmt.Errorf("Invalid size %d (valid range is %d to %d)", o.size, minSize, maxSize+1)
	case o.count < 0:
		return nil, fmt.Errorf("Invalid count %d", o.count)
	case o.port < 0 || o.port > 65535:
		return nil, fmt.Errorf("Invalid port %d", o.port)
	}
	return o, nil
}

// atoi reads a number as C's atoi does: leading blanks, a sign and the
// digits that follow; anything else ends it, and no digits (or too many)
// are 0.
func atoi(s string) int {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	end := 0
	if end < len(s) && (s[end] == '-' || s[end] == '+') {
		end++
	}
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil {
		return 0
	}
	return n
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	if err != nil {
		fmt.Fprintln(stderr, "rping:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &rping{o: o, out: stdout, log: stderr}
	if o.server {
		err = r.serve(ctx)
	} else {
		err = r.dial(ctx)
	}
	if err != nil {
		fmt.Fprintln(stderr, "rping:", err)
		return 1
	}
	return 0
}

// rping is one end: its connection, buffers and the receive slot.
type rping struct {
	o        *options
	out, log io.Writer

	c     *rdmacm.Conn
	q     *qp.QP
	cq    *cq.CQ
	buf   *uverbs.Buffer // recv info | send info | rdma buffer | start buffer
	mr    *uverbs.MR
	wc    [8]cq.WC
	own   []io.Closer // -q: rping's own QP, CQ, channel and PD, in closing order
	ownPD *uverbs.PD
}

// Offsets in the one buffer; both data buffers are -S bytes.
const (
	offRecv = 0
	offSend = infoLen
	offRDMA = 2 * infoLen
)

func (r *rping) offStart() int { return offRDMA + r.o.size }

func (r *rping) debugf(format string, a ...any) {
	if r.o.debug {
		fmt.Fprintf(r.out, format, a...)
	}
}

// setup registers the buffers on the connection's PD and posts the receive.
func (r *rping) setup(c *rdmacm.Conn) error {
	r.c, r.q, r.cq = c, c.QP(), c.CQ()
	return r.buffers(c.PD())
}

// teardown is Options.Teardown: a connect that failed after setup
// releases the buffers before the QP, CQ and PD go.
func (r *rping) teardown(*rdmacm.Conn) error { return r.release() }

// buffers allocates and registers the buffers on pd and posts the
// receive; on failure it releases what it made.
func (r *rping) buffers(pd *uverbs.PD) (err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, r.release())
		}
	}()
	if r.buf, err = uverbs.NewBuffer(offRDMA+2*r.o.size, uverbs.BufferOptions{}); err != nil {
		return err
	}
	if r.mr, err = pd.RegisterMR(r.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite); err != nil {
		return err
	}
	r.debugf("allocated & registered buffers...\n")
	return r.postRecv()
}

// release deregisters and frees the buffers; it runs before the
// connection's Close and before -q's closeOwn (the PD must be idle by
// then).
func (r *rping) release() error {
	var errs []error
	if r.mr != nil {
		errs = append(errs, r.mr.Close())
		r.mr = nil
	}
	if r.buf != nil {
		errs = append(errs, r.buf.Close())
		r.buf = nil
	}
	return errors.Join(errs...)
}

func (r *rping) sge(off, n int) uverbs.SGE {
	s, err := r.mr.SGE(off, n)
	if err != nil {
		panic(err) // the offsets are the buffer's own
	}
	return s
}

func (r *rping) postRecv() error {
	return r.q.PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{r.sge(offRecv, infoLen)}}})
}

// errDisconnected ends a wait when the peer disconnected (the QP flushed).
var errDisconnected = errors.New("disconnected")

// wait returns the next completion, sleeping on the completion channel;
// receives are re-posted. A flushed completion means the connection ended.
func (r *rping) wait(ctx context.Context) (cq.WC, error) {
	armed := false
	for {
		n, err := r.cq.Poll(r.wc[:1])
		if err != nil {
			return cq.WC{}, err
		}
		if n == 0 {
			if !armed {
				// Arm, then poll once more: a completion that arrived
				// before the arming raises no event.
				if err := r.cq.ReqNotify(false); err != nil {
					return cq.WC{}, err
				}
				armed = true
				continue
			}
			got, err := r.cq.Channel().GetEvent(ctx)
			if err != nil {
				return cq.WC{}, err
			}
			got.Ack(1)
			armed = false
			continue
		}
		wc := r.wc[0]
		if wc.Status != cq.Success {
			if wc.Status == cq.WRFlushErr {
				return wc, errDisconnected
			}
			return wc, fmt.Errorf("cq completion failed status %d (%v)", int(wc.Status), wc.Status)
		}
		if wc.Opcode.IsRecv() {
			if wc.ByteLen != infoLen {
				return wc, fmt.Errorf("Received bogus data, size %d", wc.ByteLen)
			}
			if err := r.postRecv(); err != nil {
				return wc, err
			}
		}
		return wc, nil
	}
}

// waitFor waits for the completion ok accepts. Send completions of the
// 16-byte SENDs are passed over: the peer's answer may complete before
// them (rping's CQ thread does the same, its state machine ignores them).
func (r *rping) waitFor(ctx context.Context, what string, ok func(cq.WC) bool) (cq.WC, error) {
	for {
		wc, err := r.wait(ctx)
		if err != nil {
			return wc, err
		}
		if ok(wc) {
			return wc, nil
		}
		if wc.Opcode != cq.OpSend {
			return wc, fmt.Errorf("wait for %s: got a %v completion", what, wc.Opcode)
		}
	}
}

func isRecv(wc cq.WC) bool { return wc.Opcode.IsRecv() }

// watch turns the connection's DISCONNECTED (or any end) into a flushed QP,
// which ends the current wait.
func (r *rping) watch(ctx context.Context) {
	go func() {
		for {
			ev, err := r.c.WaitEvent(ctx)
			if err != nil {
				return
			}
			r.debugf("cma_event type %s\n", ev.Type)
			switch ev.Type {
			case rdmacm.EventDisconnected, rdmacm.EventDeviceRemoval, rdmacm.EventUnreachable:
				return
			}
		}
	}()
}

func (r *rping) options(setup func(*rdmacm.Conn) error) rdmacm.Options {
	return rdmacm.Options{
		Cap:                qp.Cap{MaxSendWR: sqDepth, MaxRecvWR: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQE:                2 * sqDepth,
		CompChannel:        true,
		ResponderResources: 1,
		InitiatorDepth:     1,
		RetryCount:         7,
		RNRRetryCount:      7,
		Setup:              setup,
		Teardown:           r.teardown,
	}
}

// putInfo writes a struct rping_rdma_info at off: buf, rkey, size, all
// big-endian.
func (r *rping) putInfo(off int, addr uint64, rkey uint32, size uint32) {
	b := r.buf.Bytes()[off : off+infoLen]
	binary.BigEndian.PutUint64(b[0:], addr)
	binary.BigEndian.PutUint32(b[8:], rkey)
	binary.BigEndian.PutUint32(b[12:], size)
}

func (r *rping) getInfo() (addr uint64, rkey, size uint32) {
	b := r.buf.Bytes()[offRecv : offRecv+infoLen]
	return binary.BigEndian.Uint64(b[0:]), binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
}

func (r *rping) send(ctx context.Context) error {
	return r.q.PostSend([]qp.SendWR{{ID: 2, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{r.sge(offSend, infoLen)}}})
}

// cstring is b up to its first NUL.
func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

func hostPort(host string, port int) string {
	if host == "" {
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// dial is rping_run_client.
func (r *rping) dial(ctx context.Context) error {
	o := r.options(r.setup)
	if r.o.source != "" {
		src, err := netip.ParseAddr(r.o.source)
		if err != nil {
			return fmt.Errorf("-I %q: %w", r.o.source, err)
		}
		o.Source = src
	}
	var c *rdmacm.Conn
	var err error
	if r.o.selfQP {
		c, err = r.dialOwnQP(ctx, o)
	} else {
		c, err = rdmacm.Dial(ctx, hostPort(r.o.addr, r.o.port), o)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	defer r.closeOwn(c)
	defer r.release()
	r.debugf("rdma_connect successful\n")
	r.watch(ctx)
	err = r.client(ctx)
	if errors.Is(err, errDisconnected) {
		r.debugf("a completion flushed: the connection ended\n")
		err = nil
	}
	r.debugf("rping client done\n")
	return err
}

// dialOwnQP is the client's -q: resolve, build rping's own PD, CQ and QP
// on the route's device, and let the CM drive only the transitions
// (rdma_init_qp_attr, rdma_establish).
func (r *rping) dialOwnQP(ctx context.Context, o rdmacm.Options) (*rdmacm.Conn, error) {
	rt, err := rdmacm.Resolve(ctx, hostPort(r.o.addr, r.o.port), o)
	if err != nil {
		return nil, err
	}
	if err := r.buildOwnQP(rt.Context()); err != nil {
		rt.Close()
		return nil, err
	}
	o.Setup = func(c *rdmacm.Conn) error {
		r.c = c
		return r.buffers(r.ownPD)
	}
	c, err := rt.ConnectQP(ctx, r.q, o)
	if err != nil {
		r.closeOwn(nil) // Teardown released the buffers
		rt.Close()
		return nil, err
	}
	return c, nil
}

// buildOwnQP makes -q's PD, completion channel, CQ and QP (in RESET) on
// dev; closeOwn closes them.
func (r *rping) buildOwnQP(dev *uverbs.Context) error {
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	r.ownPD = pd
	r.own = []io.Closer{pd}
	ch, err := cq.NewChannel(dev)
	if err != nil {
		r.closeOwn(nil)
		return err
	}
	r.own = append([]io.Closer{ch}, r.own...)
	ccq, err := cq.New(dev, 2*sqDepth, ch)
	if err != nil {
		r.closeOwn(nil)
		return err
	}
	r.own = append([]io.Closer{ccq}, r.own...)
	q, err := qp.New(pd, qp.Spec{Type: qp.RC, SendCQ: ccq, RecvCQ: ccq, Cap: qp.Cap{MaxSendWR: sqDepth, MaxRecvWR: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		r.closeOwn(nil)
		return err
	}
	r.own = append([]io.Closer{q}, r.own...)
	r.q, r.cq = q, ccq
	return nil
}

// closeOwn closes what buildOwnQP made, QP first; with a connection, it
// disconnects first (the QP goes before the Conn's Close). Nothing without
// -q.
func (r *rping) closeOwn(c *rdmacm.Conn) {
	if len(r.own) == 0 {
		return
	}
	if c != nil {
		c.Disconnect()
	}
	for _, x := range r.own {
		x.Close()
	}
	r.own, r.ownPD = nil, nil
}

// fill is the client's ping pattern (rping_test_client).
func fill(b []byte, ping int, start byte) {
	cc := copy(b, fmt.Sprintf("rdma-ping-%d: ", ping))
	c := start
	for i := cc; i < len(b); i++ {
		b[i] = c
		c++
		if c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
}

func (r *rping) client(ctx context.Context) error {
	size := r.o.size
	b := r.buf.Bytes()
	start := byte(65)
	for ping := 0; r.o.count == 0 || ping < r.o.count; ping++ {
		sbuf := b[r.offStart() : r.offStart()+size]
		fill(sbuf, ping, start)
		if start++; start > 122 {
			start = 65
		}
		r.putInfo(offSend, r.buf.Addr()+uint64(r.offStart()), r.mr.RKey(), uint32(size))
		if err := r.send(ctx); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if _, err := r.waitFor(ctx, "RDMA_WRITE_ADV", isRecv); err != nil {
			return err
		}
		r.putInfo(offSend, r.buf.Addr()+offRDMA, r.mr.RKey(), uint32(size))
		if err := r.send(ctx); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if _, err := r.waitFor(ctx, "RDMA_WRITE_COMPLETE", isRecv); err != nil {
			return err
		}
		rbuf := b[offRDMA : offRDMA+size]
		if r.o.validate && !bytes.Equal(sbuf, rbuf) {
			return errors.New("data mismatch!")
		}
		if r.o.verbose {
			fmt.Fprintf(r.out, "ping data: %s\n", cstring(rbuf))
		}
	}
	return nil
}

// serve is rping_run_server: one connection, then exit.
func (r *rping) serve(ctx context.Context) error {
	l, err := rdmacm.Listen(ctx, hostPort(r.o.addr, r.o.port), rdmacm.Options{Backlog: 3})
	if err != nil {
		return err
	}
	defer l.Close()
	r.debugf("rdma_listen\n")
	// One connection, then exit; a request that fails half way (its
	// requester gave up, say) is reported and the next one taken.
	var c *rdmacm.Conn
	for c == nil {
		req, err := l.Request(ctx)
		if err != nil {
			return err
		}
		r.debugf("accepting client connection request\n")
		if r.o.selfQP {
			c, err = r.acceptOwnQP(ctx, req)
		} else {
			c, err = req.Accept(ctx, r.options(r.setup))
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			fmt.Fprintln(r.log, "rping: connection request failed:", err)
		}
	}
	// Deferred calls run last first: the buffers, then (-q) the
	// disconnect and what rping built, then the connection, whose Close
	// may close the device context with it.
	defer c.Close()
	defer r.closeOwn(c)
	defer r.release()
	r.watch(ctx)
	err = r.serveLoop(ctx)
	if errors.Is(err, errDisconnected) {
		r.debugf("a completion flushed: the connection ended\n")
		err = nil
	}
	return err
}

// acceptOwnQP is -q: the QP, its CQ and PD are rping's, the CM only drives
// the transitions.
func (r *rping) acceptOwnQP(ctx context.Context, req *rdmacm.Request) (*rdmacm.Conn, error) {
	if err := r.buildOwnQP(req.Context()); err != nil {
		req.Reject(nil)
		return nil, err
	}
	o := r.options(nil)
	o.Setup = func(c *rdmacm.Conn) error {
		r.c = c
		return r.buffers(r.ownPD)
	}
	c, err := req.AcceptQP(ctx, r.q, o)
	if err != nil {
		r.closeOwn(nil) // Teardown released the buffers
		return nil, err
	}
	return c, nil
}

func (r *rping) serveLoop(ctx context.Context) error {
	b := r.buf.Bytes()
	for {
		if _, err := r.waitFor(ctx, "RDMA_READ_ADV", isRecv); err != nil {
			return err
		}
		addr, rkey, size := r.getInfo()
		r.debugf("Received rkey %x addr %x len %d from peer\n", rkey, addr, size)
		if int(size) > r.o.size {
			return fmt.Errorf("the client's buffer of %d bytes exceeds -S %d", size, r.o.size)
		}
		if err := r.q.PostSend([]qp.SendWR{{ID: 3, Opcode: qp.RDMARead, Flags: qp.Signaled, SGEs: []uverbs.SGE{r.sge(offRDMA, int(size))}, RemoteAddr: addr, RKey: rkey}}); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if _, err := r.waitFor(ctx, "RDMA_READ_COMPLETE", func(wc cq.WC) bool { return wc.Opcode == cq.OpRDMARead }); err != nil {
			return err
		}
		if r.o.verbose {
			fmt.Fprintf(r.out, "server ping data: %s\n", cstring(b[offRDMA:offRDMA+r.o.size]))
		}
		clear(b[offSend : offSend+infoLen]) // the go-ahead is 16 zero bytes
		if err := r.send(ctx); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if _, err := r.waitFor(ctx, "RDMA_WRITE_ADV", isRecv); err != nil {
			return err
		}
		addr, rkey, _ = r.getInfo()
		n := len(cstring(b[offRDMA:offRDMA+r.o.size])) + 1
		if err := r.q.PostSend([]qp.SendWR{{ID: 4, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{r.sge(offRDMA, n)}, RemoteAddr: addr, RKey: rkey}}); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if _, err := r.waitFor(ctx, "RDMA_WRITE_COMPLETE", func(wc cq.WC) bool { return wc.Opcode == cq.OpRDMAWrite }); err != nil {
			return err
		}
		if err := r.send(ctx); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
	}
}
