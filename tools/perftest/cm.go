package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// cmDestLen is sizeof(struct pingpong_dest) in perftest 4.5: what -R
// sends its address records as, and the size of every receive on the
// exchange's QP.
const cmDestLen = 56

// marshalBinary writes d as perftest's struct pingpong_dest with its
// integers big-endian (rdma_write_keys): lid, out_reads, qpn, psn, rkey at
// 0..19, vaddr at 24, the GID at 32, srqn at 48, gid_index at 52.
func (d *dest) marshalBinary(b []byte, gidIndex int) {
	clear(b[:cmDestLen])
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(d.lid))
	be.PutUint32(b[4:], d.outReads)
	be.PutUint32(b[8:], d.qpn)
	be.PutUint32(b[12:], d.psn)
	be.PutUint32(b[16:], d.rkey)
	be.PutUint64(b[24:], d.vaddr)
	copy(b[32:48], d.gid[:])
	be.PutUint32(b[48:], d.srqn)
	be.PutUint32(b[52:], uint32(gidIndex))
}

// parseBinaryDest reads rdma_read_keys' fields (it ignores srqn and the
// GID index).
func parseBinaryDest(b []byte) dest {
	be := binary.BigEndian
	var d dest
	d.lid = uint16(be.Uint32(b[0:]))
	d.outReads = be.Uint32(b[4:])
	d.qpn = be.Uint32(b[8:])
	d.psn = be.Uint32(b[12:])
	d.rkey = be.Uint32(b[16:])
	d.vaddr = be.Uint64(b[24:])
	copy(d.gid[:], b[32:48])
	return d
}

// cmExchanger is perftest's exchange over RDMA CM (-R, -z): one RC
// connection, every message one signalled SEND into the peer's single
// posted receive of cmDestLen bytes, which the reader re-posts.
type cmExchanger struct {
	conn    *rdmacm.Conn
	client  bool
	buf     *uverbs.Buffer
	mr      *uverbs.MR
	recv    [1]qp.RecvWR
	sendWR  [1]qp.SendWR
	wc      [2]cq.WC
	gotRecv bool   // a receive completed while waiting for a send
	recvLen uint32 // the bytes the last receive took
	// readLast: the exchange's last message was the peer's, and its ACK
	// may not have left yet (see Close).
	readLast bool
	timeout  time.Duration
}

const (
	cmRecvOff = 0
	cmSendOff = 64
)

// setup registers the message buffer on the connection's PD and posts
// the first receive: Options.Setup, before the connection is made. On
// failure it releases what it made; teardown (Options.Teardown) releases
// it when the connect fails afterwards, before the PD goes.
func (x *cmExchanger) setup(c *rdmacm.Conn) (err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, x.releaseBuffer())
		}
	}()
	if x.buf, err = uverbs.NewBuffer(128, uverbs.BufferOptions{}); err != nil {
		return err
	}
	if x.mr, err = c.PD().RegisterMR(x.buf, uverbs.AccessLocalWrite); err != nil {
		return err
	}
	rs, err := x.mr.SGE(cmRecvOff, cmDestLen)
	if err != nil {
		return err
	}
	x.recv[0] = qp.RecvWR{ID: 1, SGEs: []uverbs.SGE{rs}}
	return c.QP().PostRecv(x.recv[:])
}

func (x *cmExchanger) teardown(*rdmacm.Conn) error { return x.releaseBuffer() }

var cmOptions = rdmacm.Options{Cap: qp.Cap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}

// dialCM connects the exchange to the server, retrying while it does not
// listen yet (perftest retries its connect ten times).
func dialCM(host string, port int, src string) (*cmExchanger, error) {
	x := &cmExchanger{client: true, timeout: exchangeTimeout}
	o := cmOptions
	o.Setup, o.Teardown = x.setup, x.teardown
	if src != "" {
		a, err := parseIP(src)
		if err != nil {
			return nil, err
		}
		o.Source = a
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	var err error
	for try := 0; try < 50; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		x.conn, err = rdmacm.Dial(ctx, addr, o)
		cancel()
		if err == nil {
			return x, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("Unable to perform rdma_client function: %w", err)
}

// acceptCM listens on the port, takes one connection and stops
// listening, as perftest's rdma_server_connect does.
func acceptCM(port int) (*cmExchanger, error) {
	x := &cmExchanger{timeout: exchangeTimeout}
	o := cmOptions
	o.Setup, o.Teardown = x.setup, x.teardown
	l, err := rdmacm.Listen(context.Background(), "0.0.0.0:"+strconv.Itoa(port), o)
	if err != nil {
		return nil, fmt.Errorf("Couldn't listen on port %d (rdma_cm): %w", port, err)
	}
	defer l.Close()
	if x.conn, err = l.Accept(context.Background()); err != nil {
		return nil, fmt.Errorf("rdma_accept failed: %w", err)
	}
	return x, nil
}

func (x *cmExchanger) releaseBuffer() error {
	var errs []error
	if x.mr != nil {
		errs = append(errs, x.mr.Close())
		x.mr = nil
	}
	if x.buf != nil {
		errs = append(errs, x.buf.Close())
		x.buf = nil
	}
	return errors.Join(errs...)
}

// poll waits for a completion of the wanted kind (a receive, or else a
// send), remembering a receive that arrives first.
func (x *cmExchanger) poll(wantRecv bool) error {
	deadline := time.Now().Add(x.timeout)
	for spins := 0; ; spins++ {
		if wantRecv && x.gotRecv {
			x.gotRecv = false
			return nil
		}
		n, err := x.conn.CQ().Poll(x.wc[:1])
		if err != nil {
			return err
		}
		if n == 1 {
			w := &x.wc[0]
			if w.Status != cq.Success {
				return fmt.Errorf(" Bad wc status %d (%v)", w.Status, w.Status)
			}
			if w.Opcode.IsRecv() {
				x.recvLen = w.ByteLen
				if wantRecv {
					return nil
				}
				x.gotRecv = true
				continue
			}
			if !wantRecv {
				return nil
			}
			continue
		}
		if spins > 1000 {
			if x.timeout > 0 && time.Now().After(deadline) {
				return fmt.Errorf("the peer sent nothing for %v (do both ends run with the same parameters?)", x.timeout)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}

func (x *cmExchanger) write(msg []byte) error {
	b := x.buf.Bytes()
	copy(b[cmSendOff:], msg)
	s, err := x.mr.SGE(cmSendOff, len(msg))
	if err != nil {
		return err
	}
	x.sendWR[0] = qp.SendWR{ID: 2, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{s}}
	x.readLast = false
	if err := x.conn.QP().PostSend(x.sendWR[:]); err != nil {
		return fmt.Errorf("Function ibv_post_send failed: %w", err)
	}
	return x.poll(false)
}

func (x *cmExchanger) read(msg []byte) error {
	if err := x.poll(true); err != nil {
		return err
	}
	if err := checkMessageLen(x.recvLen, len(msg)); err != nil {
		return err
	}
	copy(msg, x.buf.Bytes()[cmRecvOff:cmRecvOff+len(msg)])
	x.readLast = true
	return x.conn.QP().PostRecv(x.recv[:])
}

// checkMessageLen refuses a received message of got bytes where want
// were due: the rest of the receive would be the previous message's.
func checkMessageLen(got uint32, want int) error {
	if got != uint32(want) {
		return fmt.Errorf("%w: a message of %d bytes where %d were due", errPeer, got, want)
	}
	return nil
}

func (x *cmExchanger) exchange(mine, theirs []byte) error {
	if x.client {
		if err := x.write(mine); err != nil {
			return err
		}
		return x.read(theirs)
	}
	if err := x.read(theirs); err != nil {
		return err
	}
	return x.write(mine)
}

// send has nothing to do: over RDMA CM nobody sends "done".
func (x *cmExchanger) send(msg []byte) error { return nil }

func (x *cmExchanger) setTimeout(d time.Duration) { x.timeout = d }

// cmLingerMax caps Close's wait for the peer to end the connection after
// the exchange's last message was the peer's (see lingerLimit).
const cmLingerMax = 30 * time.Second

// Close disconnects and releases the connection and its buffer. When the
// last message was the peer's (the client's end of every exchange), it
// first waits for the peer to disconnect, at most for as long as the peer
// may retransmit (lingerLimit): rxe's responder completes a receive before
// it sends the ACK, and a QP moved to ERROR drops that ACK, so an end that
// disconnected the moment its last receive completed could leave the
// peer's last send unacknowledged, retried into a QP that no longer
// answers until RETRY_EXC_ERR (a lost ACK does the same). The peer
// disconnects only once its send completed, so its DREQ says the ACK
// arrived. rocev2-server -n lingers for the same reason.
func (x *cmExchanger) Close() error {
	var errs []error
	if x.conn != nil && x.readLast {
		x.readLast = false
		errs = append(errs, x.awaitPeerDisconnect(x.lingerLimit()))
	}
	if x.mr != nil {
		errs = append(errs, x.mr.Close())
		x.mr = nil
	}
	if x.conn != nil {
		errs = append(errs, x.conn.Close())
	}
	if x.buf != nil {
		errs = append(errs, x.buf.Close())
		x.buf = nil
	}
	return errors.Join(errs...)
}

// lingerLimit is how long the peer may still retransmit a message whose
// ACK was lost: its retry budget, retry count + 1 ACK timeouts, as this
// end's QP has them (the CM gives both ends the path's ACK timeout and the
// client's retry count), capped at cmLingerMax, which is also the bound
// when the QP says no timeout (0), a code past the 5 bits, or cannot be
// queried.
func (x *cmExchanger) lingerLimit() time.Duration {
	a, err := x.conn.QP().Query()
	if err != nil || a.Timeout == 0 || a.Timeout > 31 {
		return cmLingerMax
	}
	ack := 4096 * time.Nanosecond << a.Timeout
	return min((time.Duration(a.RetryCnt)+1)*ack, cmLingerMax)
}

// awaitPeerDisconnect returns when the peer has ended the connection (or
// it broke) or d has passed; a peer that stays is no error (Close
// disconnects then), an event channel that fails is.
func (x *cmExchanger) awaitPeerDisconnect(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		ev, err := x.conn.WaitEvent(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("waiting for the peer to disconnect: %w", err)
		}
		switch ev.Type {
		case rdmacm.EventDisconnected, rdmacm.EventDeviceRemoval, rdmacm.EventUnreachable:
			return nil
		}
	}
}

// cmTestOptions are the CM options of the test QPs' connections: for
// read and atomics the outstanding reads as both depths.
func (t *tool) cmTestOptions() rdmacm.Options {
	var co rdmacm.Options
	if t.o.test.verb == verbRead || t.o.test.verb == verbAtomic {
		n := uint8(min(t.d.outReads, 255))
		co.ResponderResources, co.InitiatorDepth = n, n
	}
	return co
}

// connectCMQPs connects the test's QPs over RDMA CM (-R,
// create_rdma_cm_connection), one CM connection per QP as perftest makes
// them: a record exchange; the server, listening on the same port (for
// UD in the UDP port space), takes -q requests and accepts each with the
// next QP; the client resolves, connects QP i and only then QP i+1;
// another exchange. build makes the end (one PD, CQs and MR for every QP,
// as without -R) on the device the first request or route arrived on;
// every later one must share it. On UD, latency tests and -b add
// perftest's hello to each connection (see sendHello).
func (t *tool) connectCMQPs(build func(*uverbs.Context) (*end, error)) (e *end, err error) {
	o := t.o
	co := t.cmTestOptions()
	ud := o.conn == qp.UD
	hello := ud && (!o.test.bw || o.duplex)
	defer func() {
		if err != nil && e != nil {
			err = errors.Join(err, e.Close())
			e = nil
		}
	}()
	// own builds the end on the first device and checks the others.
	own := func(on *uverbs.Context) error {
		if e == nil {
			var err error
			e, err = build(on)
			return err
		}
		if on != e.on {
			return errors.New("Failed to create RDMA CM connection: the connections of the QPs use different RDMA devices")
		}
		return nil
	}
	if o.server == "" {
		// Listen before the exchange that lets the client connect: a C
		// client retries for only about a second (10 x 100 ms), which a
		// listen after the exchange can miss on a slow machine (seen:
		// REJECTED, reason 8, no listener).
		listen := rdmacm.Listen
		if ud {
			listen = rdmacm.ListenUD
		}
		l, err := listen(context.Background(), "0.0.0.0:"+strconv.Itoa(o.port), rdmacm.Options{Backlog: o.numQPs})
		if err != nil {
			return nil, fmt.Errorf("Failed to create RDMA CM connection: %w", err)
		}
		defer l.Close()
		// perftest's records here are its uninitialised my_dest: zeros.
		if _, err := t.s.handShake(dest{}); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), exchangeTimeout)
		defer cancel()
		for i := range o.numQPs {
			r, err := l.Request(ctx)
			if err != nil {
				return e, fmt.Errorf("Failed to create RDMA CM connection: %w", err)
			}
			if err := own(r.Context()); err != nil {
				return e, errors.Join(err, r.Reject(nil))
			}
			ao := co
			if hello {
				ao.Setup = func(*rdmacm.Conn) error { return e.postHelloRecv(i) }
			}
			c, err := r.AcceptQP(ctx, e.qps[i], ao)
			if err != nil {
				return e, fmt.Errorf("Failed to create RDMA CM connection: %w", err)
			}
			e.conns = append(e.conns, c)
			if hello {
				if err := e.awaitHello(); err != nil {
					return e, err
				}
			}
		}
	} else {
		if o.sourceIP != "" {
			src, err := parseIP(o.sourceIP)
			if err != nil {
				return nil, err
			}
			co.Source = src
		}
		if _, err := t.s.handShake(dest{}); err != nil {
			return nil, err
		}
		addr := net.JoinHostPort(o.server, strconv.Itoa(o.port))
		for i := range o.numQPs {
			if err := t.dialQP(addr, co, own, &e, i); err != nil {
				return e, err
			}
			if hello {
				if err := e.sendHello(i, e.conns[i].Remote()); err != nil {
					return e, err
				}
			}
		}
	}
	if ud {
		e.qkey = e.conns[0].QKey() // the port space's, on every QP
	}
	if _, err := t.s.handShake(dest{}); err != nil {
		return e, err
	}
	return e, nil
}

// dialQP connects QP i of *e (built by own on the first route's device),
// retrying ten times every 100 ms while the server does not listen yet, as
// perftest does. A failed attempt's QP goes back to RESET for the next;
// its Route stays in the end, holding the device, until the end closes.
func (t *tool) dialQP(addr string, co rdmacm.Options, own func(*uverbs.Context) error, e **end, i int) error {
	resolve := rdmacm.Resolve
	if t.o.conn == qp.UD {
		resolve = rdmacm.ResolveUD
	}
	var err error
	for try := 0; try < 10; try++ {
		if try > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, rerr := resolve(ctx, addr, co)
		if rerr != nil {
			cancel()
			err = rerr
			continue
		}
		if oerr := own(r.Context()); oerr != nil {
			cancel()
			return errors.Join(oerr, r.Close())
		}
		q := (*e).qps[i]
		c, cerr := r.ConnectQP(ctx, q, co)
		cancel()
		if cerr == nil {
			(*e).conns = append((*e).conns, c)
			return nil
		}
		err = cerr
		(*e).routes = append((*e).routes, r)
		if merr := q.Modify(&qp.Attr{State: qp.StateReset}, qp.AttrState); merr != nil {
			return fmt.Errorf("Failed to create RDMA CM connection: %w", errors.Join(err, merr))
		}
	}
	return fmt.Errorf("Failed to create RDMA CM connection: %w", err)
}

// The hello is -R's extra message on UD for latency and bidirectional
// tests (perftest's rdma_cm_send_ud_connection_parameters): the SIDR
// reply tells the client the server's QP, but the server learns the
// client's only from a SEND_WITH_IMM of the client's QPN on each
// connection, for which it posts a receive (GRH and 4 bytes) on the
// connection's QP before it accepts, and which it waits for before it
// takes the next request. This tool takes the peers' QPNs and GIDs from
// the address records instead, but sends and consumes the message as C
// expects. Its slot is QP i's send slice of the end's buffer, which the
// test overwrites anyway.

// helloSGE is QP i's hello slot, n bytes.
func (e *end) helloSGE(i, n int) (uverbs.SGE, error) {
	return e.mr.SGE(i*e.buffSize, n)
}

// postHelloRecv posts QP i's receive for the hello: AcceptQP's Setup.
func (e *end) postHelloRecv(i int) error {
	sge, err := e.helloSGE(i, udAddition+4)
	if err == nil {
		err = e.qps[i].PostRecv([]qp.RecvWR{{ID: 0, SGEs: []uverbs.SGE{sge}}})
	}
	if err != nil {
		return fmt.Errorf("Failed to post receive for RDMA CM UD request connection parameters: %w", err)
	}
	return nil
}

// awaitHello waits for the client's hello on the receive CQ.
func (e *end) awaitHello() error {
	w, err := awaitOne(e.recvCQ)
	if err == nil && !w.Opcode.IsRecv() {
		err = fmt.Errorf("opcode %v", w.Opcode)
	}
	if err != nil {
		return fmt.Errorf("Failed to initialize UD connection parameters for RDMA CM: %w", err)
	}
	return nil
}

// sendHello sends QP i's number to the server's QP of its connection.
func (e *end) sendHello(i int, r rdmacm.Remote) error {
	q := e.qps[i]
	sge, err := e.helloSGE(i, 4)
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint32(e.buf.Bytes()[i*e.buffSize:], q.Num())
	wr := []qp.SendWR{{ID: 0, Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: q.Num(), SGEs: []uverbs.SGE{sge},
		AH: r.AH, RemoteQPN: r.QPN, RemoteQKey: r.QKey}}
	if err := q.PostSend(wr); err != nil {
		return fmt.Errorf("Failed to post send for connection %d for RDMA CM UD send connection parameters: %w", i, err)
	}
	if _, err := awaitOne(e.sendCQ); err != nil {
		return fmt.Errorf("Failed to send UD connection parameters to the remote node: %w", err)
	}
	return nil
}

// awaitOne polls c for one successful completion.
func awaitOne(c *cq.CQ) (cq.WC, error) {
	var wc [1]cq.WC
	deadline := time.Now().Add(exchangeTimeout)
	for time.Now().Before(deadline) {
		n, err := c.Poll(wc[:])
		if err != nil {
			return wc[0], err
		}
		if n == 1 {
			if wc[0].Status != cq.Success {
				return wc[0], fmt.Errorf("Bad WQE status %d (%v)", wc[0].Status, wc[0].Status)
			}
			return wc[0], nil
		}
		time.Sleep(50 * time.Microsecond)
	}
	return wc[0], fmt.Errorf("no completion in %v", exchangeTimeout)
}
