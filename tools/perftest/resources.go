package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/tools/internal/devwatch"
	"github.com/pureverbs/pureverbs/uverbs"
)

// device is the opened device and what the exchange needs before any
// queue exists: the port, the GID and the outstanding reads it allows.
type device struct {
	dev      uverbs.Device
	ctx      *uverbs.Context
	port     uverbs.PortAttr
	gid      uverbs.GIDEntry
	outReads int
	unwatch  func() // ends devwatch.Exit's watch of the device
}

// openDevice opens -d (or the first device), checks the port and picks
// the GID: -x, or as perftest's get_best_gid_index does on RoCE, the
// port's IPv4-mapped RoCE v2 entry before any other.
func openDevice(o *options, stdout, stderr io.Writer) (*device, error) {
	devs, err := uverbs.Devices()
	if err != nil {
		return nil, fmt.Errorf(" Failed to get IB devices list: %w", err)
	}
	var found *uverbs.Device
	for i := range devs {
		if o.device == "" || devs[i].Name == o.device {
			found = &devs[i]
			break
		}
	}
	if found == nil {
		if o.device == "" {
			return nil, errors.New(" Did not detect devices \n If device exists, check if driver is up")
		}
		return nil, fmt.Errorf("IB device %s not found\n Unable to find the Infiniband/RoCE device", o.device)
	}
	d := &device{dev: *found}
	if o.device == "" {
		o.device = found.Name
	}
	if d.ctx, err = uverbs.Open(*found); err != nil {
		return nil, fmt.Errorf(" Couldn't get context for the device: %w", err)
	}
	// A removed device ends the tool wherever it waits (for its peer's
	// connection, too), so that `rdma link delete` can finish.
	if d.unwatch, err = devwatch.Exit(d.ctx, "perftest", stderr); err != nil {
		return nil, errors.Join(err, d.ctx.Close())
	}
	fail := func(err error) (*device, error) {
		d.unwatch()
		return nil, errors.Join(err, d.ctx.Close())
	}
	if d.port, err = d.ctx.QueryPort(o.ibPort); err != nil {
		return fail(fmt.Errorf(" Unable to query port %d attributes: %w", o.ibPort, err))
	}
	if d.port.State != uverbs.PortActive {
		return fail(fmt.Errorf(" Port number %d state is %v", o.ibPort, d.port.State))
	}
	if d.gid, err = pickGID(d.ctx, o.ibPort, o.gidIndex); err != nil {
		return fail(err)
	}
	attr, err := d.ctx.QueryDevice()
	if err != nil {
		return fail(fmt.Errorf(" Couldn't query the device: %w", err))
	}
	d.outReads = 1
	if o.test.verb == verbRead || o.test.verb == verbAtomic {
		maxReads := attr.MaxQPRdAtom
		switch {
		case o.outReads > maxReads:
			fmt.Fprintf(stdout, "%s", resultLine)
			fmt.Fprintf(stderr, " Number of outstanding reads is above max = %d\n Changing to that max value\n", maxReads)
			d.outReads = maxReads
		case o.outReads <= 0:
			d.outReads = maxReads
		default:
			d.outReads = o.outReads
		}
	}
	return d, nil
}

// pickGID is the GID entry this side uses on devctx's port: index (-x) if
// given, else, as perftest's get_best_gid_index does on RoCE, the port's
// IPv4-mapped RoCE v2 entry before any other.
func pickGID(devctx *uverbs.Context, port uint8, index int) (uverbs.GIDEntry, error) {
	if index >= 0 {
		g, err := devctx.QueryGID(port, index)
		if err != nil {
			return g, fmt.Errorf(" Failed to query GID index %d: %w", index, err)
		}
		return g, nil
	}
	table, err := devctx.QueryGIDTable()
	if err != nil {
		return uverbs.GIDEntry{}, fmt.Errorf(" Failed to query the GID table: %w", err)
	}
	best := -1
	for i, e := range table {
		if e.Port != port {
			continue
		}
		v4 := e.GID.To4() != nil && e.Type == uverbs.GIDTypeRoCEv2
		if best < 0 || v4 && !(table[best].GID.To4() != nil && table[best].Type == uverbs.GIDTypeRoCEv2) {
			best = i
		}
	}
	if best < 0 {
		return uverbs.GIDEntry{}, errors.New(" No GID on the port")
	}
	return table[best], nil
}

// activeMTU is the MTU enum this side proposes: -m, or the port's active
// MTU.
func (d *device) activeMTU(o *options) (int, error) {
	if o.mtu == 0 {
		return int(d.port.ActiveMTU), nil
	}
	m, _ := mtuFromBytes(o.mtu)
	if m > int(d.port.ActiveMTU) {
		return 0, fmt.Errorf(" Invalid MTU - %d \n Max MTU of the port is %d", o.mtu, mtuBytes(int(d.port.ActiveMTU)))
	}
	return m, nil
}

// end is one side's verbs objects for a test: one buffer and MR shared by
// every QP, a send and a receive CQ, the QPs, and for UD the address
// handles towards the peer's QPs.
type end struct {
	o        *options
	d        *device
	ch       *cq.Channel
	events   *eventWaiter // -e's waits on ch
	pd       *uverbs.PD
	buf      *uverbs.Buffer
	mr       *uverbs.MR
	sendCQ   *cq.CQ
	recvCQ   *cq.CQ
	qps      []*qp.QP
	ahs      []*qp.AH
	buffSize int // perftest's BUFF_SIZE: one QP's slice of the buffer
	cycle    int // the agreed cycle buffer
	line     int // the agreed cache line size
	mtu      int // the agreed MTU enum
	// on is the device context the objects are built on: the tool's, or
	// with -R the one the CM connections share.
	on *uverbs.Context
	// gid is this side's GID entry on on's port.
	gid uverbs.GIDEntry
	// conns connect the QPs, one each (-R); routes are the attempts that
	// failed, kept for their hold of on until Close.
	conns  []*rdmacm.Conn
	routes []*rdmacm.Route
	// qkey is the Q_Key UD sends carry: perftest's, or with -R the one
	// the CM gave both sides' QPs.
	qkey uint32
}

// bufferSize is perftest's BUFF_SIZE(size, cycle_buffer).
func bufferSize(size, cycle int) int { return max(size, cycle) }

// inc is perftest's INC: the step between consecutive messages' addresses.
func inc(size, line int) int {
	if size > line {
		return roundUp(size, line)
	}
	return line
}

// newEnd creates the objects in perftest's ctx_init order: the buffer
// (two slices per QP: what it sends from, and its target window), the
// channel for -e, PD, MR, CQs and QPs in RESET, on the device context on.
func newEnd(o *options, d *device, on *uverbs.Context, cycle, line, mtu int) (e *end, err error) {
	e = &end{o: o, d: d, on: on, gid: d.gid, cycle: cycle, line: line, mtu: mtu, buffSize: bufferSize(o.size, cycle), qkey: defQKey}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Close())
			e = nil
		}
	}()
	if on != d.ctx {
		// RDMA CM chose another device than -d: its GID, by the same rule.
		if e.gid, err = pickGID(on, o.ibPort, o.gidIndex); err != nil {
			return e, err
		}
	}
	n := o.numQPs
	total := roundUp(2*n*e.buffSize, cycle) + cycle // room for the UD receive shift
	if e.buf, err = uverbs.NewBuffer(total, uverbs.BufferOptions{}); err != nil {
		return e, fmt.Errorf("Couldn't allocate work buf.: %w", err)
	}
	b := e.buf.Bytes()
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	if o.events {
		if e.ch, err = cq.NewChannel(on); err != nil {
			return e, fmt.Errorf("Couldn't create completion channel: %w", err)
		}
		if e.events, err = newEventWaiter(e.ch); err != nil {
			return e, err
		}
	}
	if e.pd, err = on.AllocPD(); err != nil {
		return e, fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	access := uverbs.AccessLocalWrite
	switch o.test.verb {
	case verbWrite:
		access |= uverbs.AccessRemoteWrite
	case verbRead:
		access |= uverbs.AccessRemoteRead
	case verbAtomic:
		access |= uverbs.AccessRemoteAtomic
	}
	if e.mr, err = e.pd.RegisterMR(e.buf, access); err != nil {
		return e, fmt.Errorf("Couldn't allocate MR: %w", err)
	}
	tx := o.txDepth
	rx := o.rxDepth
	if o.test.verb != verbSend {
		rx = 1
	}
	if e.sendCQ, err = cq.New(on, tx*n, e.ch); err != nil {
		return e, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	if e.recvCQ, err = cq.New(on, rx*n, e.ch); err != nil {
		return e, fmt.Errorf("Couldn't create a receiver CQ: %w", err)
	}
	e.qps = make([]*qp.QP, n)
	for i := range n {
		e.qps[i], err = qp.New(e.pd, qp.Spec{
			Type: o.conn, SendCQ: e.sendCQ, RecvCQ: e.recvCQ,
			Cap: qp.Cap{MaxSendWR: uint32(tx), MaxRecvWR: uint32(rx), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(max(o.inline, 0))},
		})
		if err != nil {
			return e, fmt.Errorf("Couldn't create QP: %w", err)
		}
	}
	return e, nil
}

// localDests are this side's records (set_up_connection): each QP's
// number, a random PSN, the MR's rkey and the QP's target window.
func (e *end) localDests() []dest {
	ds := make([]dest, len(e.qps))
	for i, q := range e.qps {
		ds[i] = dest{
			outReads: uint32(e.d.outReads), qpn: q.Num(), psn: rand.Uint32() & 0xffffff,
			rkey: e.mr.RKey(), vaddr: e.mr.Addr() + uint64((len(e.qps)+i)*e.buffSize), gid: e.gid.GID,
		}
	}
	return ds
}

// connect is ctx_connect: every QP to INIT (access by verb), RTR towards
// its peer (GRH with hop limit 0xFF, min RNR timer 12, the peer's reads
// outstanding here) and, on the client, for -b and in the latency tests,
// RTS. UD QPs go to RTS and get an address handle towards the peer QP.
func (e *end) connect(my, rem []dest) error {
	o := e.o
	if e.conns != nil {
		// Each QP's connection took it to RTS; UD still needs the
		// address handles.
		if o.conn == qp.UD {
			for i := range e.qps {
				if err := e.newAH(rem[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	toRTS := o.server != "" || o.duplex || !o.test.bw
	for i, q := range e.qps {
		if o.conn == qp.UD {
			if err := q.ActivateUD(qp.UDOptions{QKey: defQKey, SendPSN: my[i].psn, Port: o.ibPort}); err != nil {
				return fmt.Errorf("Failed to modify UD QP to RTS: %w", err)
			}
			if err := e.newAH(rem[i]); err != nil {
				return err
			}
			continue
		}
		access := uverbs.Access(0)
		switch o.test.verb {
		case verbSend:
			access = uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite
		case verbWrite:
			access = uverbs.AccessRemoteWrite
		case verbRead:
			access = uverbs.AccessRemoteRead
		case verbAtomic:
			access = uverbs.AccessRemoteAtomic
		}
		init := qp.Attr{State: qp.StateInit, PortNum: o.ibPort, AccessFlags: access}
		if err := q.Modify(&init, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
			return fmt.Errorf("Failed to modify QP to INIT: %w", err)
		}
		rtr := qp.Attr{
			State: qp.StateRTR, PathMTU: uverbs.MTU(e.mtu), DestQPNum: rem[i].qpn, RQPSN: rem[i].psn,
			AH: uverbs.AHAttr{IsGlobal: true, SL: o.sl, PortNum: o.ibPort, GRH: uverbs.GlobalRoute{
				DGID: rem[i].gid, SGIDIndex: uint8(e.gid.Index), HopLimit: 0xff, TrafficClass: o.tclass}},
		}
		mask := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
		if o.conn == qp.RC {
			rtr.MaxDestRdAtomic = uint8(min(my[i].outReads, 255))
			rtr.MinRNRTimer = 12
			mask |= qp.AttrMinRNRTimer | qp.AttrMaxDestRdAtomic
		}
		if err := q.Modify(&rtr, mask); err != nil {
			return fmt.Errorf("Failed to modify QP %d to RTR: %w", q.Num(), err)
		}
		if !toRTS {
			continue
		}
		rts := qp.Attr{State: qp.StateRTS, SQPSN: my[i].psn}
		mask = qp.AttrState | qp.AttrSQPSN
		if o.conn == qp.RC {
			// perftest asks for 7 retries, which rxe takes as "for ever";
			// 6 lets a dead peer end the run with RETRY_EXC_ERR.
			rts.Timeout, rts.RetryCnt, rts.RNRRetry = o.qpTimeout, 6, 7
			rts.MaxRdAtomic = uint8(min(rem[i].outReads, 255))
			mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
		}
		if err := q.Modify(&rts, mask); err != nil {
			return fmt.Errorf("Failed to modify QP to RTS: %w", err)
		}
	}
	return nil
}

// newAH adds the address handle of a UD QP towards the peer's GID.
func (e *end) newAH(rem dest) error {
	o := e.o
	ah, err := qp.NewAH(e.pd, qp.AHSpec{DGID: rem.gid, SGID: e.gid, HopLimit: 0xff, Port: o.ibPort, TrafficClass: o.tclass, SL: o.sl})
	if err != nil {
		return fmt.Errorf("Failed to create AH for UD: %w", err)
	}
	e.ahs = append(e.ahs, ah)
	return nil
}

// Close releases everything in reverse order of creation. The QPs' CM
// connections disconnect first and close just before the PD, which holds
// a UD connection's address handle (Conn.Remote); the last of them may
// close the context the objects are on, and the PD and channel with it
// (the exchange's connection, on the same device, usually keeps it open).
func (e *end) Close() error {
	var errs []error
	for _, c := range e.conns {
		errs = append(errs, c.Disconnect())
	}
	for _, ah := range e.ahs {
		errs = append(errs, ah.Close())
	}
	for _, q := range e.qps {
		if q != nil {
			errs = append(errs, q.Close())
		}
	}
	for _, c := range []*cq.CQ{e.sendCQ, e.recvCQ} {
		if c != nil {
			c.Ack(c.Unacked())
			errs = append(errs, c.Close())
		}
	}
	if e.mr != nil {
		errs = append(errs, e.mr.Close())
	}
	for _, c := range e.conns {
		errs = append(errs, c.Close())
	}
	if e.pd != nil {
		errs = append(errs, e.pd.Close())
	}
	if e.events != nil {
		errs = append(errs, e.events.Close())
	}
	if e.ch != nil {
		errs = append(errs, e.ch.Close())
	}
	if e.buf != nil {
		errs = append(errs, e.buf.Close())
	}
	for _, r := range e.routes {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// target is QP i's window: what the peer writes, reads or adds to.
func (e *end) target(i int) []byte {
	off := (len(e.qps) + i) * e.buffSize
	return e.buf.Bytes()[off : off+e.buffSize]
}

// clearTargets zeroes every target window (PERFTEST_TARGET).
func (e *end) clearTargets() {
	for i := range e.qps {
		clear(e.target(i))
	}
}

// reportTargets writes, per QP, how many bytes of its window are not
// zero and what its 8-byte words add up to (PERFTEST_TARGET).
func (e *end) reportTargets(w io.Writer) {
	for i := range e.qps {
		m := e.target(i)
		nonzero := 0
		var sum uint64
		for k, b := range m {
			if b != 0 {
				nonzero++
			}
			if k%8 == 0 && k+8 <= len(m) {
				sum += binary.NativeEndian.Uint64(m[k:])
			}
		}
		fmt.Fprintf(w, "perftest: target window %d: %d of %d bytes non-zero, 8-byte words sum to %d\n", i, nonzero, len(m), sum)
	}
}
