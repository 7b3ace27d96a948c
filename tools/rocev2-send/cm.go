package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// sourceAddr is the IPv4 address of the -d/-g GID: the CM resolves from it,
// which picks that device.
func sourceAddr(o *options) (netip.Addr, error) {
	dev, err := uverbs.DeviceByName(o.dev)
	if err != nil {
		return netip.Addr{}, err
	}
	c, err := uverbs.Open(dev)
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	g, err := o.gid.Entry(c, o.ibPort)
	if err != nil {
		return netip.Addr{}, err
	}
	a := netip.AddrFrom16(g.GID)
	if !a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("-cm: GID %d of %s (%v) maps no IPv4 address", g.Index, o.dev, g.GID)
	}
	return a.Unmap(), nil
}

// dialSender connects over RDMA CM (rdmacm.Dial builds the PD, CQ and QP
// on the device that owns the source address) and registers the buffer
// there.
func dialSender(ctx context.Context, o *options) (s *sender, err error) {
	src, err := sourceAddr(o)
	if err != nil {
		return nil, err
	}
	s = &sender{}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
			s = nil
		}
	}()
	if s.buf, err = uverbs.NewBuffer(o.depth*max(o.maxSize, 1), uverbs.BufferOptions{}); err != nil {
		return s, err
	}
	addr := net.JoinHostPort(o.host, strconv.Itoa(o.tcpPort))
	c, err := rdmacm.Dial(ctx, addr, rdmacm.Options{
		Source: src,
		Cap:    qp.Cap{MaxSendWR: uint32(o.depth), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQE:    o.depth + 1,
	})
	if err != nil {
		return s, fmt.Errorf("rdma cm connect %s from %v: %w", addr, src, err)
	}
	s.cm, s.qp, s.cq = c, c.QP(), c.CQ()
	// Registered once connected: the sender posts no receive, so nothing
	// needs the MR before (no Options.Setup, hence no Teardown).
	if s.mr, err = c.PD().RegisterMR(s.buf, uverbs.AccessLocalWrite); err != nil {
		return s, fmt.Errorf("register the send buffer: %w", err)
	}
	return s, nil
}

// closeCM deregisters the buffer, closes the connection (disconnect, then
// QP, CQ and PD) and frees the buffer.
func (s *sender) closeCM() error {
	var errs []error
	if s.mr != nil {
		errs = append(errs, s.mr.Close())
	}
	errs = append(errs, s.cm.Close())
	if s.buf != nil {
		errs = append(errs, s.buf.Close())
	}
	return errors.Join(errs...)
}
