//go:build linux

// Package vethns builds two throwaway network namespaces joined by a veth
// pair, for netpoll's tests and for tools/netpoll-bench.
//
// Everything happens inside namespaces this package creates: the veth is made
// in namespace A with its peer placed directly in namespace B, so the host's
// own namespace never sees a new link or address. Close deletes the link and
// drops the namespaces; the kernel frees a namespace once its last socket is
// closed too. It needs CAP_SYS_ADMIN and CAP_NET_ADMIN (root on the host).
package vethns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Default addresses of the two ends: a private /24 that only exists inside
// the namespaces this package makes.
var (
	DefaultAddrA = netip.MustParseAddr("10.200.0.1")
	DefaultAddrB = netip.MustParseAddr("10.200.0.2")
)

// Config shapes the pair. The zero value is one queue each way, GRO off.
type Config struct {
	// Queues is the number of TX and RX queues on each end (0 means 1).
	Queues int
	// GRO turns generic receive offload on and TSO off at both ends. A veth
	// with GRO on receives through one NAPI instance per queue, so sockets get
	// real NAPI ids (SO_INCOMING_NAPI_ID) and busy polling has a queue to
	// poll; but veth_xmit only takes that path for a packet whose sending
	// device has TSO off (veth_skb_is_eligible_for_gro), hence TSO off too.
	GRO bool
	// MTU of both ends (0 keeps the kernel default, 1500).
	MTU int
	// AddrA and AddrB are the /24 addresses of the ends (zero: the defaults).
	AddrA, AddrB netip.Addr
}

// NS is one end: a network namespace holding one end of the veth.
type NS struct {
	handle netns.NsHandle
	// Link is the name of the veth end inside this namespace.
	Link string
	// Addr is the IPv4 address of Link.
	Addr netip.Addr
}

// Pair is two namespaces joined by a veth.
type Pair struct {
	A, B *NS
}

// Check reports why New cannot work here (not root), or nil.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("vethns: needs root (CAP_SYS_ADMIN to create network namespaces, CAP_NET_ADMIN for veth)")
	}
	return nil
}

// New creates namespaces A and B, a veth between them with cfg's queues,
// addresses and GRO, and brings both ends and both loopbacks up. On any
// failure it undoes what it did.
func New(cfg Config) (_ *Pair, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if cfg.Queues <= 0 {
		cfg.Queues = 1
	}
	if !cfg.AddrA.IsValid() {
		cfg.AddrA = DefaultAddrA
	}
	if !cfg.AddrB.IsValid() {
		cfg.AddrB = DefaultAddrB
	}
	p := &Pair{
		A: &NS{handle: netns.None(), Link: "vpa", Addr: cfg.AddrA},
		B: &NS{handle: netns.None(), Link: "vpb", Addr: cfg.AddrB},
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.A.handle, err = newNS(); err != nil {
		return nil, err
	}
	if p.B.handle, err = newNS(); err != nil {
		return nil, err
	}
	ha, err := netlink.NewHandleAt(p.A.handle)
	if err != nil {
		return nil, fmt.Errorf("vethns: netlink handle in A: %w", err)
	}
	defer ha.Close()
	hb, err := netlink.NewHandleAt(p.B.handle)
	if err != nil {
		return nil, fmt.Errorf("vethns: netlink handle in B: %w", err)
	}
	defer hb.Close()

	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name:        p.A.Link,
			NumTxQueues: cfg.Queues,
			NumRxQueues: cfg.Queues,
			MTU:         cfg.MTU,
			TxQLen:      -1,
		},
		PeerName:        p.B.Link,
		PeerNamespace:   netlink.NsFd(int(p.B.handle)),
		PeerNumTxQueues: uint32(cfg.Queues),
		PeerNumRxQueues: uint32(cfg.Queues),
		PeerMTU:         uint32(cfg.MTU),
		PeerTxQLen:      -1,
	}
	if err := ha.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("vethns: add veth: %w", err)
	}
	for _, e := range []struct {
		h  *netlink.Handle
		ns *NS
	}{{ha, p.A}, {hb, p.B}} {
		if err := e.ns.up(e.h, cfg.GRO); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// up gives the end its address, sets GRO and brings it and lo up.
func (n *NS) up(h *netlink.Handle, gro bool) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("vethns: lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("vethns: lo up: %w", err)
	}
	link, err := h.LinkByName(n.Link)
	if err != nil {
		return fmt.Errorf("vethns: %s: %w", n.Link, err)
	}
	addr := &netlink.Addr{IPNet: netlink.NewIPNet(n.Addr.AsSlice())}
	addr.IPNet.Mask = []byte{255, 255, 255, 0}
	if err := h.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("vethns: address %s on %s: %w", n.Addr, n.Link, err)
	}
	if gro {
		if err := n.Do(func() error { return setNAPI(n.Link) }); err != nil {
			return err
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("vethns: %s up: %w", n.Link, err)
	}
	return nil
}

// newNS makes an unnamed network namespace and returns a handle to it,
// leaving the calling thread in the namespace it started in.
func newNS() (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), fmt.Errorf("vethns: current namespace: %w", err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), fmt.Errorf("vethns: new namespace: %w", err)
	}
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in the new namespace: keep it locked so it
		// dies with this goroutine instead of running other goroutines.
		ns.Close()
		return netns.None(), fmt.Errorf("vethns: back to the original namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ns, nil
}

// Do runs fn on an OS thread that is inside n, so that sockets fn creates
// belong to n (they stay there after Do returns). Goroutines fn starts run
// elsewhere.
func (n *NS) Do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("vethns: current namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(n.handle); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("vethns: enter namespace: %w", err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: it is discarded when the goroutine ends.
		return errors.Join(ferr, fmt.Errorf("vethns: leave namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Close deletes the veth and releases both namespaces. It is idempotent.
func (p *Pair) Close() error {
	var errs []error
	if p.A != nil && p.A.handle.IsOpen() {
		if h, err := netlink.NewHandleAt(p.A.handle); err == nil {
			if l, err := h.LinkByName(p.A.Link); err == nil {
				if err := h.LinkDel(l); err != nil {
					errs = append(errs, fmt.Errorf("vethns: delete %s: %w", p.A.Link, err))
				}
			}
			h.Close()
		}
	}
	for _, n := range []*NS{p.A, p.B} {
		if n != nil && n.handle.IsOpen() {
			if err := n.handle.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// GRO reports whether generic receive offload is on for n's veth end.
func (n *NS) GRO() (on bool, err error) {
	err = n.Do(func() error {
		v, err := ethtoolValue(n.Link, unix.ETHTOOL_GGRO, 0)
		on = v != 0
		return err
	})
	return on, err
}
