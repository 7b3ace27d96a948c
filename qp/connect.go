package qp

import (
	"cmp"
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// ConnectOptions are this side's choices for Connect. Zero fields take
// rxe-safe defaults.
type ConnectOptions struct {
	// SGID is the local GID entry to send from, found by address
	// (uverbs.Context.FindGID) or by netdev (NetdevGID). It is required:
	// the zero entry is refused, never taken for index 0 (on RoCE the IPv6
	// link-local GID).
	SGID    uverbs.GIDEntry
	PathMTU uverbs.MTU // 0 means 1024; use the port's active MTU
	SendPSN uint32     // this side's initial send PSN (24 bits); tell it to the peer
	Port    uint8      // 0 means SGID's port
	// Access is what the peer may do to this side's memory through the
	// QP (uverbs.AccessRemoteWrite, ...); 0 grants nothing.
	Access uverbs.Access
	// MinRNRTimer is the RNR NAK delay code; 0 means 12 (0.64 ms), the
	// value that avoids rxe's RNR-NAK storms.
	MinRNRTimer uint8
	Timeout     uint8 // ACK timeout code; 0 means 14 (about 67 ms)
	// RetryCnt is the transport retry count, 1..6; 0 means 6. 7 is
	// refused: rxe takes it as "retry forever", so a dead path would hang.
	RetryCnt        uint8
	RNRRetry        uint8 // RNR retries; 0 means 7 (forever: the receiver is the flow control)
	MaxRdAtomic     uint8 // RDMA READs and atomics outstanding from here; 0 means 1
	MaxDestRdAtomic uint8 // ... and at this side from the peer; 0 means 1
	HopLimit        uint8 // 0 means 64
}

// Connect takes an RC (or UC) queue pair from RESET or INIT to RTS in one
// call, connected to peer: INIT (port, access), RTR (the peer's QPN and
// PSN, a global route to its GID from SGID, path MTU, min RNR timer)
// and RTS (this side's send PSN, timeout and retries). To receive from the
// first message on, post receives before calling it (from INIT, which
// ToInit reaches).
func (q *QP) Connect(peer Peer, o ConnectOptions) error {
	if q.typ == UD {
		return fmt.Errorf("qp: connect: a UD QP is not connected (use ActivateUD and address handles): %w", unix.EINVAL)
	}
	if err := q.closedError("connect"); err != nil {
		return err
	}
	if peer.QPN>>24 != 0 || peer.PSN>>24 != 0 || o.SendPSN>>24 != 0 {
		return fmt.Errorf("qp: connect: QPN %#x, PSN %#x or send PSN %#x wider than 24 bits: %w", peer.QPN, peer.PSN, o.SendPSN, unix.EINVAL)
	}
	if o.RetryCnt > 6 {
		return fmt.Errorf("qp: connect: retry count %d: rxe retries 7 forever, use 1..6: %w", o.RetryCnt, unix.EINVAL)
	}
	if peer.GID.IsZero() {
		return fmt.Errorf("qp: connect: the peer's GID is zero (RoCE needs it): %w", unix.EINVAL)
	}
	switch q.State() {
	case StateReset:
		_, port, err := sourceGID("connect", o.SGID, o.Port)
		if err != nil {
			return err
		}
		if err := q.ToInit(InitParams{Port: port, Access: o.Access}); err != nil {
			return err
		}
	case StateInit:
	default:
		return fmt.Errorf("qp: connect: QP is in %v, want RESET or INIT: %w", q.State(), ErrBadState)
	}
	if err := q.ToRTR(RTRParams{
		DestQPN:         peer.QPN,
		RQPSN:           peer.PSN,
		PathMTU:         cmp.Or(o.PathMTU, defaultPathMTU),
		DGID:            peer.GID,
		SGID:            o.SGID,
		HopLimit:        o.HopLimit,
		Port:            o.Port,
		MaxDestRdAtomic: o.MaxDestRdAtomic,
		MinRNRTimer:     o.MinRNRTimer,
	}); err != nil {
		return err
	}
	return q.ToRTS(RTSParams{
		SQPSN:       o.SendPSN,
		Timeout:     o.Timeout,
		RetryCnt:    o.RetryCnt,
		RNRRetry:    o.RNRRetry,
		MaxRdAtomic: o.MaxRdAtomic,
	})
}
