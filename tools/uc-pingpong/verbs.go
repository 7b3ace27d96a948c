package main

import (
	"fmt"

	"github.com/pureverbs/pureverbs/qp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// endpoint is one end: the objects ibv_uc_pingpong makes, in its order
// (pp.Open), with a UC QP.
type endpoint struct {
	*pp.ConnectedEnd
	o *options
}

// openSession makes the end with a UC QP and the session over it.
func openSession(o *options) (*pp.Session, error) {
	c, err := pp.OpenConnected(pp.Spec{Options: o.Options, Type: qp.UC, Access: uverbs.AccessLocalWrite})
	if err != nil {
		return nil, err
	}
	e := &endpoint{ConnectedEnd: c, o: o}
	return e.Session(o.validate, e.connect), nil
}

// connect moves the QP to RTR towards remote (a GRH with hop limit 1 only
// when the peer sent a GID; path MTU, destination QPN and receive PSN —
// UC takes no RDMA READ or RNR attributes) and then to RTS with the send
// PSN alone, as the C tool does.
func (e *endpoint) connect(remote pp.Dest, myPSN uint32) error {
	rtr, mask := e.RTRBase(remote, e.o.mtu)
	if err := e.QP.Modify(&rtr, mask); err != nil {
		return fmt.Errorf("Failed to modify QP to RTR: %w", err)
	}
	rts := qp.Attr{State: qp.StateRTS, SQPSN: myPSN}
	if err := e.QP.Modify(&rts, qp.AttrState|qp.AttrSQPSN); err != nil {
		return fmt.Errorf("Failed to modify QP to RTS: %w", err)
	}
	return nil
}
