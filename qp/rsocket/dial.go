package rsocket

import (
	"context"
	"net"
	"net/netip"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
)

// Dial connects to an rsocket listener at address ("ip:port"), as
// rsocket's rconnect: the RDMA CM resolves the address and the route (from
// o.Source), the connect request carries this side's ring and target list,
// the reply the peer's. Every step honours ctx. Errors are *net.OpError.
func Dial(ctx context.Context, address string, o Options) (*Conn, error) {
	fail := func(err error) (*Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "rsocket", Addr: addrOf(address), Err: err}
	}
	s, err := o.sizes()
	if err != nil {
		return fail(err)
	}
	route, err := rdmacm.Resolve(ctx, address, rdmacm.Options{Source: o.Source, ResolveTimeout: o.ResolveTimeout})
	if err != nil {
		return fail(err)
	}
	r, err := newRes(route.Context(), s)
	if err != nil {
		route.Close()
		return fail(err)
	}
	c := newConn(r)
	var pd [connDataLen]byte
	c.connData().marshal(pd[:])
	rc, err := route.ConnectQP(ctx, r.q, rdmacm.Options{PrivateData: pd[:], Setup: c.setup})
	if err != nil {
		r.release()
		route.Close()
		return fail(err)
	}
	if err := c.start(rc, o); err != nil {
		return fail(err)
	}
	return c, nil
}

// newConn sets up the protocol state of a connection not yet made.
func newConn(r *res) *Conn {
	c := &Conn{
		r:          *r,
		rmsg:       make([]uint32, r.rq+1),
		rwr:        make([]qp.RecvWR, r.rq),
		sqeAvail:   r.sq - ctrlSlots,
		sbufAvail:  r.sbufLen,
		ctrlMax:    ctrlSlots,
		rbufFree:   r.rbufLen / 2,
		rbufAvail:  r.rbufLen / 2,
		rseqComp:   uint16(r.rq / 2),
		remoteSGE:  1,
		targetFill: 1,
		iomaps:     make([]iomapEntry, r.iomapSize),
		cmDone:     make(chan struct{}),
	}
	for i := range c.rwr {
		c.rwr[i].ID = recvID
	}
	c.readReady = c.readReadyFunc
	c.writeReady = c.writeReadyFunc
	c.sendsDone = c.sendsDoneFunc
	return c
}

// connData is what this side tells the peer.
func (c *Conn) connData() *connData {
	return &connData{
		Version:    connVersion,
		Flags:      flagIOMap,
		Credits:    uint16(c.r.rq),
		IOMapScale: scaleIOMapSize(c.r.iomapSize),
		TargetSGL:  sge{Addr: c.r.targetAddr(), Key: c.r.rmr.RKey(), Length: targetSGEs},
		DataBuf:    sge{Addr: c.r.rbufAddr(), Key: c.r.rmr.RKey(), Length: uint32(c.r.rbufLen / 2)},
	}
}

// setup runs with the QP in INIT, before the connect goes out: the
// receive queue is filled first, as rsocket does.
func (c *Conn) setup(*rdmacm.Conn) error { return c.r.postRecvs(c.rwr) }

// start takes the connected CM connection and the peer's connect data,
// hands out the second ring half and starts watching CM events. On failure
// it releases everything.
func (c *Conn) start(rc *rdmacm.Conn, o Options) error {
	c.r.rc = rc
	peer, err := parseConnData(rc.PrivateData())
	if err != nil {
		rc.Disconnect()
		c.r.release()
		return err
	}
	c.remoteSGL = peer.TargetSGL
	c.peerOrder = sgeOrder(peer.Flags)
	c.target[0] = peer.DataBuf
	c.sseqComp = peer.Credits
	if peer.Flags&flagIOMap != 0 {
		c.peerIOMap = sge{Addr: peer.TargetSGL.Addr + targetSGEs*sgeLen, Key: peer.TargetSGL.Key}
		c.peerIOMapUsed = make([]bool, iomapSizeOf(peer.IOMapScale))
	}
	c.local = net.TCPAddrFromAddrPort(rc.LocalAddr())
	c.remote = net.TCPAddrFromAddrPort(rc.RemoteAddr())
	c.state = stConnected | stReadable | stWritable
	ctx, cancel := context.WithCancel(context.Background())
	c.cmStop = cancel
	go c.watchCM(ctx)
	c.mu.Lock()
	c.progress()
	c.mu.Unlock()
	if o.Keepalive > 0 {
		c.startKeepalive(o.Keepalive)
	}
	return nil
}

// addrOf is address as a net.Addr for errors, when it parses.
func addrOf(address string) net.Addr {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}
