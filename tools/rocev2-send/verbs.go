package main

// The sender's verbs calls, in one place.

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// sender is the FPGA stand-in's verbs objects: a buffer of queue-depth
// slots, its MR, a CQ and an RC QP.
type sender struct {
	ctx  *uverbs.Context
	pd   *uverbs.PD
	buf  *uverbs.Buffer
	mr   *uverbs.MR
	cq   *cq.CQ
	qp   *qp.QP
	gid  uverbs.GID
	sgid uverbs.GIDEntry // the entry of gid (-g), which the QP sends from
	port uverbs.PortAttr
	// cm, for -cm, owns the context, PD, CQ and QP (the buffer and MR
	// stay the sender's).
	cm *rdmacm.Conn
}

func openSender(o *options) (s *sender, err error) {
	dev, err := uverbs.DeviceByName(o.dev)
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
	if s.ctx, err = uverbs.Open(dev); err != nil {
		return s, err
	}
	if s.port, err = s.ctx.QueryPort(o.ibPort); err != nil {
		return s, err
	}
	g, err := o.gid.Entry(s.ctx, o.ibPort)
	if err != nil {
		return s, err
	}
	s.gid, s.sgid = g.GID, g
	if s.buf, err = uverbs.NewBuffer(o.depth*max(o.maxSize, 1), uverbs.BufferOptions{}); err != nil {
		return s, err
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return s, err
	}
	if s.mr, err = s.pd.RegisterMR(s.buf, uverbs.AccessLocalWrite); err != nil {
		return s, err
	}
	if s.cq, err = cq.New(s.ctx, o.depth+1, nil); err != nil {
		return s, err
	}
	s.qp, err = qp.New(s.pd, qp.Spec{Type: qp.RC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: qp.Cap{MaxSendWR: uint32(o.depth), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return s, err
	}
	if err = s.qp.ToInit(qp.InitParams{Port: o.ibPort}); err != nil {
		return s, fmt.Errorf("QP to INIT: %w", err)
	}
	return s, nil
}

// connect moves the QP to RTR towards the server and then to RTS, retrying
// RNR NAKs forever (the receiver's queue is the flow control).
func (s *sender) connect(o *options, srv qp.Peer, psn uint32) error {
	mtu := uverbs.MTU(o.mtu)
	if mtu == 0 {
		mtu = s.port.ActiveMTU
	}
	if err := s.qp.ToRTR(qp.RTRParams{DestQPN: srv.QPN, RQPSN: srv.PSN, PathMTU: mtu, DGID: srv.GID,
		SGID: s.sgid, Port: o.ibPort}); err != nil {
		return fmt.Errorf("QP to RTR: %w", err)
	}
	if err := s.qp.ToRTS(qp.RTSParams{SQPSN: psn, Timeout: o.timeout, RetryCnt: 6, RNRRetry: 7}); err != nil {
		return fmt.Errorf("QP to RTS: %w", err)
	}
	return nil
}

func (s *sender) close() error {
	if s.cm != nil {
		return s.closeCM()
	}
	var errs []error
	if s.qp != nil {
		errs = append(errs, s.qp.Close())
	}
	if s.cq != nil {
		errs = append(errs, s.cq.Close())
	}
	if s.mr != nil {
		errs = append(errs, s.mr.Close())
	}
	if s.pd != nil {
		errs = append(errs, s.pd.Close())
	}
	if s.ctx != nil {
		errs = append(errs, s.ctx.Close())
	}
	if s.buf != nil {
		errs = append(errs, s.buf.Close())
	}
	return errors.Join(errs...)
}
