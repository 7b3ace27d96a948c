package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// parseAddr turns "host:port" into an address; host names are looked up
// (honouring ctx).
func parseAddr(ctx context.Context, address string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(address); err == nil {
		return ap, nil
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("rdmacm: address %q: %w", address, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("rdmacm: address %q: port: %w", address, err)
	}
	if host == "" {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a, uint16(p)), nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("rdmacm: address %q: %w", address, err)
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), uint16(p)), nil
}

// Dial connects an RC queue pair to address ("ip:port", in RDMA CM's TCP
// port space) and returns the connection with its QP in RTS. The steps
// are librdmacm's: rdma_create_id, rdma_resolve_addr (from o.Source),
// rdma_resolve_route, ibv_alloc_pd / ibv_create_cq / rdma_create_qp (INIT
// from rdma_init_qp_attr), o.Setup, rdma_connect, and on CONNECT_RESPONSE
// INIT (the CM's access flags), RTR, RTS and the RTU. Every wait honours
// ctx; on any failure everything built is released before Dial returns,
// after o.Teardown if Setup had succeeded.
//
// More than MaxPrivateDataREQ bytes of o.PrivateData are refused before
// anything is sent (EINVAL). A refused connect is a *RejectError; a peer
// that does not answer is an *EventError (UNREACHABLE, ETIMEDOUT) after
// the CM's retries, or ctx's error.
func Dial(ctx context.Context, address string, o Options) (*Conn, error) {
	dst, err := parseAddr(ctx, address)
	if err != nil {
		return nil, err
	}
	c, err := dialID(ctx, dst, &o, ucma.PortSpaceTCP, qp.RC)
	if err != nil {
		return nil, err
	}
	if err := c.connectRC(ctx, &o); err != nil {
		return nil, c.fail(err)
	}
	return c, nil
}

// dialID resolves dst and its route (resolveID) and builds the QP (in
// RESET) on the device the route uses.
func dialID(ctx context.Context, dst netip.AddrPort, o *Options, ps ucma.PortSpace, typ qp.Type) (*Conn, error) {
	c, err := resolveID(ctx, dst, o, ps, typ)
	if err != nil {
		return nil, err
	}
	if err := c.build(o, typ); err != nil {
		return nil, errors.Join(err, c.release())
	}
	return c, nil
}

// privateDataLimit is what the active side's request carries: a REQ, or
// a SIDR REQ in the UDP port space.
func privateDataLimit(udp bool) int {
	if udp {
		return MaxPrivateDataSIDRREQ
	}
	return MaxPrivateDataREQ
}

// resolveID creates the id on a channel of its own, resolves dst and its
// route, and takes a hold of the device the route uses.
func resolveID(ctx context.Context, dst netip.AddrPort, o *Options, ps ucma.PortSpace, typ qp.Type) (_ *Conn, err error) {
	addr := dst.String()
	if maxData := privateDataLimit(ps == ucma.PortSpaceUDP); len(o.PrivateData) > maxData {
		return nil, fmt.Errorf("rdmacm: dial %s: %d bytes of private data, a REQ carries %d: %w", addr, len(o.PrivateData), maxData, unix.EINVAL)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch, err := ucma.Open()
	if err != nil {
		return nil, err
	}
	c := &Conn{ch: ch, uid: newUID(), udp: ps == ucma.PortSpaceUDP}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.release())
		}
	}()
	if c.id, err = ch.CreateID(c.uid, ps, uverbs.QPType(typ)); err != nil {
		return nil, err
	}
	c.hasID = true
	var src netip.AddrPort
	if o.Source.IsValid() {
		src = netip.AddrPortFrom(o.Source, 0)
	}
	if err := ch.ResolveAddr(c.id, src, dst, o.resolveTimeout()); err != nil {
		return nil, wrapStep("resolve address", addr, err)
	}
	if _, err := c.awaitEvent(ctx, "resolve address", addr, ucma.EventAddrResolved); err != nil {
		return nil, err
	}
	if err := ch.ResolveRoute(c.id, o.resolveTimeout()); err != nil {
		return nil, wrapStep("resolve route", addr, err)
	}
	if _, err := c.awaitEvent(ctx, "resolve route", addr, ucma.EventRouteResolved); err != nil {
		return nil, err
	}
	info, err := ch.QueryAddr(c.id)
	if err != nil {
		return nil, err
	}
	c.local, c.remote = info.Src, info.Dst
	if c.dev, err = devices.acquire(info.NodeGUID); err != nil {
		return nil, wrapStep("dial", addr, err)
	}
	c.devHeld = true
	return c, nil
}

// connectRC runs the active side of an RC connect on a resolved id whose
// QP is in RESET or INIT.
func (c *Conn) connectRC(ctx context.Context, o *Options) error {
	addr := c.remote.String()
	if c.q.State() == qp.StateReset {
		if err := toStateFromCM(c.ch, c.id, c.q, qp.StateInit, nil); err != nil {
			return err
		}
	}
	if err := c.setup(o, "dial"); err != nil {
		return err
	}
	p := c.connParam(o, max(o.ResponderResources, 1), max(o.InitiatorDepth, 1))
	if err := c.ch.Connect(c.id, p, ucma.ECE{}); err != nil {
		return wrapStep("connect", addr, err)
	}
	ev, err := c.awaitEvent(ctx, "connect", addr, ucma.EventConnectResponse, ucma.EventEstablished)
	if err != nil {
		return err
	}
	c.peer = ev.ConnParam()
	if ev.Type == ucma.EventEstablished {
		// iWARP: the CM moved the QP itself.
		c.connected = true
		return nil
	}
	for _, s := range []qp.State{qp.StateInit, qp.StateRTR, qp.StateRTS} {
		if err := toStateFromCM(c.ch, c.id, c.q, s, nil); err != nil {
			c.q.ToError()
			c.ch.Reject(c.id, 0, nil)
			return wrapStep("connect", addr, err)
		}
	}
	if err := c.ch.Accept(c.id, c.uid, nil, ucma.ECE{}); err != nil {
		c.q.ToError()
		return wrapStep("connect", addr, err)
	}
	c.connected = true
	return nil
}
