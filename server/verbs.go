package server

// Every call into the verbs packages lives in this file, so that an API
// change of the core touches one place.

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// wcID is a completion's work request ID (cq.WC.ID in the target API).
func wcID(wc *cq.WC) uint64 { return wc.WRID }

// device holds what lives as long as the server: context, PD, slab, MR
// and completion channel.
type device struct {
	cfg  Config
	ctx  *uverbs.Context
	pd   *uverbs.PD
	buf  *uverbs.Buffer
	mr   *uverbs.MR
	ch   *cq.Channel
	gid  uverbs.GID
	sgid uverbs.GIDEntry // the entry of gid, which the QP sends from
	port uverbs.PortAttr
}

// openDevice opens cfg.Device, checks the port and GID against cfg, then
// makes the slab (depth × max payload, off-heap), its MR with local write
// only, and the completion channel. On failure it releases what it made.
func openDevice(cfg Config) (d *device, err error) {
	dev, err := uverbs.DeviceByName(cfg.Device)
	if err != nil {
		return nil, fmt.Errorf("server: device %q: %w", cfg.Device, err)
	}
	d = &device{cfg: cfg}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.closeAll())
			d = nil
		}
	}()
	if d.ctx, err = uverbs.Open(dev); err != nil {
		return d, fmt.Errorf("server: open %s: %w", cfg.Device, err)
	}
	if d.port, err = d.ctx.QueryPort(cfg.Port); err != nil {
		return d, fmt.Errorf("server: query port %d of %s: %w", cfg.Port, cfg.Device, err)
	}
	if cfg.PathMTU != 0 {
		if err = checkPathMTU(cfg.PathMTU, d.port.ActiveMTU); err != nil {
			return d, err
		}
	}
	g, err := localGID(d.ctx, cfg)
	if err != nil {
		return d, err
	}
	d.gid, d.sgid = g.GID, g
	if d.buf, err = uverbs.NewBuffer(cfg.Depth*cfg.MaxPayload, uverbs.BufferOptions{}); err != nil {
		return d, fmt.Errorf("server: slab of %d bytes: %w", cfg.Depth*cfg.MaxPayload, err)
	}
	if d.pd, err = d.ctx.AllocPD(); err != nil {
		return d, fmt.Errorf("server: %w", err)
	}
	// A SEND receiver needs no remote access to its memory: an RDMA WRITE
	// or READ from the sender is refused by the MR.
	if d.mr, err = d.pd.RegisterMR(d.buf, uverbs.AccessLocalWrite); err != nil {
		return d, fmt.Errorf("server: register slab: %w", err)
	}
	if d.ch, err = cq.NewChannel(d.ctx); err != nil {
		return d, fmt.Errorf("server: completion channel: %w", err)
	}
	return d, nil
}

// slab returns the slab's bytes, its address in the MR and the lkey.
func (d *device) slab() ([]byte, uint64, uint32) {
	return d.buf.Bytes()[:d.cfg.Depth*d.cfg.MaxPayload], d.mr.Addr(), d.mr.LKey()
}

// freeSlab unmaps the slab; the MR is gone by then (the buffer refuses
// while it is registered).
func (d *device) freeSlab() error {
	if d.buf != nil {
		if err := d.buf.Close(); err != nil {
			return fmt.Errorf("server: unmap the receive slab: %w", err)
		}
	}
	return nil
}

// closeAll releases everything, the slab last: for failures before any
// frame can exist.
func (d *device) closeAll() error {
	err := d.close()
	if d.buf != nil {
		err = errors.Join(err, d.buf.Close())
	}
	return err
}

// close releases everything but the slab, in reverse order of creation.
func (d *device) close() error {
	var errs []error
	if d.ch != nil {
		errs = append(errs, d.ch.Close())
	}
	if d.mr != nil {
		errs = append(errs, d.mr.Close())
	}
	if d.pd != nil {
		errs = append(errs, d.pd.Close())
	}
	if d.ctx != nil {
		errs = append(errs, d.ctx.Close())
	}
	return errors.Join(errs...)
}

// rcQueue is one connection's CQ and RC QP; it implements queue.
type rcQueue struct {
	d  *device
	cq *cq.CQ
	qp *qp.QP
}

// newRCQueue creates a CQ of depth entries on the channel and an RC QP
// with depth receives and one send, and takes the QP to INIT granting no
// remote access.
func (d *device) newRCQueue() (r *rcQueue, err error) {
	r = &rcQueue{d: d}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close())
			r = nil
		}
	}()
	depth := d.cfg.Depth
	if r.cq, err = cq.New(d.ctx, depth, d.ch); err != nil {
		return r, fmt.Errorf("server: create CQ: %w", err)
	}
	r.qp, err = qp.New(d.pd, qp.Spec{
		Type:   qp.RC,
		SendCQ: r.cq,
		RecvCQ: r.cq,
		Cap:    qp.Cap{MaxSendWR: 1, MaxRecvWR: uint32(depth), MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return r, fmt.Errorf("server: create QP: %w", err)
	}
	if err = r.qp.ToInit(qp.InitParams{Port: d.cfg.Port}); err != nil {
		return r, fmt.Errorf("server: QP %#x RESET→INIT: %w", r.qp.Num(), err)
	}
	return r, nil
}

// connect takes the QP from INIT through RTR (towards the peer) to RTS.
func (r *rcQueue) connect(p qp.Peer, mtu uverbs.MTU, minRNR uint8, sendPSN uint32) error {
	err := r.qp.ToRTR(qp.RTRParams{
		DestQPN:     p.QPN,
		RQPSN:       p.PSN,
		PathMTU:     mtu,
		DGID:        p.GID,
		SGID:        r.d.sgid,
		Port:        r.d.cfg.Port,
		MinRNRTimer: minRNR,
	})
	if err != nil {
		return fmt.Errorf("server: QP %#x INIT→RTR: %w", r.qp.Num(), err)
	}
	// The server never sends; the send side's retry counts only matter
	// for the ACKs the QP generates.
	if err := r.qp.ToRTS(qp.RTSParams{SQPSN: sendPSN, Timeout: 14, RetryCnt: 3, RNRRetry: 7}); err != nil {
		return fmt.Errorf("server: QP %#x RTR→RTS: %w", r.qp.Num(), err)
	}
	return nil
}

// setMinRNRTimer changes the RNR NAK delay of a connected QP (RTS→RTS):
// the CM's RTR attributes set it to 0, 655 ms.
func (r *rcQueue) setMinRNRTimer(t uint8) error {
	if err := r.qp.Modify(&qp.Attr{State: qp.StateRTS, MinRNRTimer: t}, qp.AttrState|qp.AttrMinRNRTimer); err != nil {
		return fmt.Errorf("server: QP %#x min RNR timer %d: %w", r.qp.Num(), t, err)
	}
	return nil
}

func (r *rcQueue) num() uint32 { return r.qp.Num() }

// Poll implements queue.
func (r *rcQueue) Poll(wc []cq.WC) (int, error) { return r.cq.Poll(wc) }

// PostRecv implements queue.
func (r *rcQueue) PostRecv(wrs []qp.RecvWR) error { return r.qp.PostRecv(wrs) }

// Arm implements queue.
func (r *rcQueue) Arm() error {
	if err := r.cq.ReqNotify(false); err != nil {
		return fmt.Errorf("server: req_notify_cq: %w", err)
	}
	return nil
}

// EventFD implements queue.
func (r *rcQueue) EventFD() int { return r.d.ch.FD() }

// DrainEvents implements queue: it acknowledges every event, whichever CQ
// of this server it names.
func (r *rcQueue) DrainEvents() error {
	for {
		c, err := r.d.ch.TryGetEvent()
		if errors.Is(err, cq.ErrNoEvent) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("server: get CQ event: %w", err)
		}
		c.Ack(1)
	}
}

// toError moves the QP to ERROR: the kernel flushes its receives.
func (r *rcQueue) toError() error {
	if err := r.qp.ToError(); err != nil {
		return fmt.Errorf("server: QP %#x to ERROR: %w", r.qp.Num(), err)
	}
	return nil
}

// close destroys the QP and then the CQ, acknowledging the events read
// for it first. It reads no events from the channel: they may be the
// running connection's (a side-channel exchange closes its queue while
// another connection's loop waits for its CQ's event), and the kernel
// drops the events of a destroyed CQ that nobody read.
func (r *rcQueue) close() error {
	var errs []error
	if r.qp != nil {
		errs = append(errs, r.qp.Close())
	}
	if r.cq != nil {
		if n := r.cq.Unacked(); n > 0 {
			r.cq.Ack(n)
		}
		errs = append(errs, r.cq.Close())
	}
	return errors.Join(errs...)
}

// sge is a scatter/gather element (uverbs.SGE in the target API).
type sge = uverbs.SGE

// gidSource is what localGID asks: a *uverbs.Context.
type gidSource interface {
	QueryGID(port uint8, index int) (uverbs.GIDEntry, error)
	FindGID(port uint8, ip netip.Addr) (uverbs.GIDEntry, error)
	PortGID(port uint8) (uverbs.GIDEntry, error)
}

// localGID is the GID entry cfg chooses: by address (GIDAddr), by index
// (GIDIndex), or else the RoCE v2 GID of the port's netdev. It must be a
// populated RoCE v2 entry.
func localGID(c gidSource, cfg Config) (uverbs.GIDEntry, error) {
	switch {
	case cfg.GIDAddr.IsValid():
		g, err := c.FindGID(cfg.Port, cfg.GIDAddr)
		if errors.Is(err, uverbs.ErrGIDUnused) {
			return g, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return g, err
	case cfg.GIDIndex == DefaultGIDIndex:
		g, err := c.PortGID(cfg.Port)
		if err != nil && !errors.Is(err, uverbs.ErrClosed) {
			return g, fmt.Errorf("%w: %w (choose the GID with GIDAddr or GIDIndex)", ErrConfig, err)
		}
		return g, err
	}
	g, err := c.QueryGID(cfg.Port, cfg.GIDIndex)
	switch {
	case errors.Is(err, uverbs.ErrGIDUnused):
		return g, configError("GID index %d on %s port %d is unused (all zeros): pick a populated RoCE v2 entry (%v)", cfg.GIDIndex, cfg.Device, cfg.Port, err)
	case err != nil:
		return g, fmt.Errorf("server: query GID %d of %s: %w", cfg.GIDIndex, cfg.Device, err)
	case g.GID.IsZero():
		return g, configError("GID index %d on %s port %d is all zeros", cfg.GIDIndex, cfg.Device, cfg.Port)
	case g.Type != uverbs.GIDTypeRoCEv2:
		return g, configError("GID index %d on %s port %d (%v) is %v, not RoCE v2", cfg.GIDIndex, cfg.Device, cfg.Port, g.GID, g.Type)
	}
	return g, nil
}
