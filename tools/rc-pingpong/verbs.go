package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pureverbs/pureverbs/qp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// endpoint is one end: the objects ibv_rc_pingpong makes, in its order
// (pp.Open), with an RC QP.
type endpoint struct {
	*pp.ConnectedEnd
	o *options
}

// openSession makes the end with an RC QP and the session over it; the MR
// is on-demand with --odp, and -t is refused once the device is open, as
// rc-pingpong has no completion timestamps. With RC_PINGPONG_MALLOCS=1
// the session counts the loop's allocations and reports them on stderr.
func openSession(o *options, stderr io.Writer) (*pp.Session, error) {
	access := uverbs.AccessLocalWrite
	if o.odp {
		access |= uverbs.AccessOnDemand
	}
	p := pp.Spec{Options: o.Options, Type: qp.RC, Access: access}
	if o.ts {
		p.CheckDevice = func(devctx *uverbs.Context) error {
			attr, err := devctx.QueryDevice()
			if err != nil {
				return fmt.Errorf("Couldn't query device for its features: %w", err)
			}
			if attr.TimestampMask == 0 {
				return errors.New("The device isn't completion timestamp capable")
			}
			return errors.New("-t: completion timestamps are not supported by rc-pingpong")
		}
	}
	c, err := pp.OpenConnected(p)
	if err != nil {
		return nil, err
	}
	e := &endpoint{ConnectedEnd: c, o: o}
	s := e.Session(o.validate, e.connect)
	if os.Getenv("RC_PINGPONG_MALLOCS") == "1" {
		s.Around = func(p *pp.Pingpong) func() { return countMallocs(p, o.Iters, stderr) }
	}
	return s, nil
}

// connect moves the QP to RTR towards remote and then to RTS, with the C
// tool's attributes: a GRH (hop limit 1) only when the peer sent a GID,
// ACK timeout 14, seven retries of each kind, one RDMA read either way.
func (e *endpoint) connect(remote pp.Dest, myPSN uint32) error {
	rtr, mask := e.RTRBase(remote, e.o.mtu)
	rtr.MaxDestRdAtomic, rtr.MinRNRTimer = 1, 12
	if err := e.QP.Modify(&rtr, mask|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		return fmt.Errorf("Failed to modify QP to RTR: %w", err)
	}
	rts := qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: myPSN, MaxRdAtomic: 1}
	if err := e.QP.Modify(&rts, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|
		qp.AttrSQPSN|qp.AttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("Failed to modify QP to RTS: %w", err)
	}
	return nil
}
