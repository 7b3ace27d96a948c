package rdmacm

import (
	"context"
	"fmt"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
)

// DialUD resolves address ("ip:port" in RDMA CM's UDP port space) and
// sends a service ID resolution request (SIDR REQ) carrying o.PrivateData
// (at most MaxPrivateDataSIDRREQ bytes). The returned connection's UD QP is
// in RTS and Remote gives the peer's QPN, Q_Key and an address handle
// towards it. The QP goes through INIT (the CM's P_Key index, port and
// Q_Key), RTR and RTS before the request, as librdmacm's rdma_create_qp
// does for UD ids; o.Setup runs after that, so receives are posted before
// anything is sent. On failure o.Teardown runs (if Setup had succeeded)
// and everything built is released, as for Dial.
func DialUD(ctx context.Context, address string, o Options) (*Conn, error) {
	dst, err := parseAddr(ctx, address)
	if err != nil {
		return nil, err
	}
	c, err := dialID(ctx, dst, &o, ucma.PortSpaceUDP, qp.UD)
	if err != nil {
		return nil, err
	}
	if err := c.connectUD(ctx, &o); err != nil {
		return nil, c.fail(err)
	}
	return c, nil
}

// ListenUD listens in RDMA CM's UDP port space: Accept answers each SIDR
// request with a UD QP of its own (its QPN and the Q_Key in the SIDR REP).
// A UD Conn's peer is known only from what it sends (the GRH and the
// source QPN of its datagrams).
func ListenUD(ctx context.Context, address string, o Options) (*Listener, error) {
	return listen(ctx, address, o, ucma.PortSpaceUDP, qp.UD)
}

// Remote is a UD connection's peer as the SIDR reply gave it: its QP
// number, its Q_Key and an address handle towards it (owned by the Conn).
// The passive side has none (zero QPN, nil AH).
type Remote struct {
	QPN  uint32
	QKey uint32
	AH   *qp.AH
}

// Remote returns the UD peer (see the type); zero for RC connections.
func (c *Conn) Remote() Remote { return Remote{QPN: c.ud.QPNum, QKey: c.ud.QKey, AH: c.ah} }

// QKey is the Q_Key of this side's UD QP, as the CM set it (the UDP port
// space's 0x01234567): datagrams to it must carry it.
func (c *Conn) QKey() uint32 { return c.qkey }

// activateUD takes a UD QP to RTS: INIT with the CM's attributes, RTR and
// RTS (send PSN 0) with nothing else, as librdmacm's ucma_init_ud_qp.
func (c *Conn) activateUD() error {
	attr, mask, err := initQPAttr(c.ch, c.id, qp.StateInit)
	if err != nil {
		return err
	}
	if err := c.q.Modify(&attr, mask&modifyMask); err != nil {
		return fmt.Errorf("rdmacm: UD QP to INIT with the CM's attributes: %w", err)
	}
	c.qkey = attr.QKey
	if err := c.q.Modify(&qp.Attr{State: qp.StateRTR}, qp.AttrState); err != nil {
		return err
	}
	return c.q.Modify(&qp.Attr{State: qp.StateRTS}, qp.AttrState|qp.AttrSQPSN)
}

func (c *Conn) connectUD(ctx context.Context, o *Options) error {
	addr := c.remote.String()
	if err := c.activateUD(); err != nil {
		return err
	}
	if err := c.setup(o, "dial"); err != nil {
		return err
	}
	if err := c.ch.Connect(c.id, ucma.ConnParam{QPNum: c.q.Num(), PrivateData: o.PrivateData}, ucma.ECE{}); err != nil {
		return wrapStep("connect", addr, err)
	}
	ev, err := c.awaitEvent(ctx, "connect", addr, ucma.EventEstablished)
	if err != nil {
		return err
	}
	c.ud = ev.UDParam()
	g := c.ud.AH.GRH
	port := max(c.ud.AH.PortNum, 1)
	sgid, err := c.dev.ctx.QueryGID(port, int(g.SGIDIndex))
	if err != nil {
		return fmt.Errorf("rdmacm: dial %s: the SIDR reply's source GID: %w", addr, err)
	}
	c.ah, err = qp.NewAH(c.q.PD(), qp.AHSpec{DGID: g.DGID, SGID: sgid, HopLimit: g.HopLimit,
		Port: port, TrafficClass: g.TrafficClass, FlowLabel: g.FlowLabel, SL: c.ud.AH.SL})
	if err != nil {
		return fmt.Errorf("rdmacm: dial %s: address handle from the SIDR reply: %w", addr, err)
	}
	return nil
}

// acceptUD answers a SIDR request: the QP to RTS, o.Setup, then the SIDR
// REP with its QPN (the kernel adds the port space's Q_Key).
func (c *Conn) acceptUD(o *Options) error {
	addr := c.remote.String()
	if err := c.activateUD(); err != nil {
		return err
	}
	if err := c.setup(o, "accept"); err != nil {
		return err
	}
	p := ucma.ConnParam{QPNum: c.q.Num(), QKey: c.qkey, PrivateData: o.PrivateData}
	if err := c.ch.Accept(c.id, c.uid, &p, ucma.ECE{}); err != nil {
		return wrapStep("accept", addr, err)
	}
	return nil
}
