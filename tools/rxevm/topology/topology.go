// Package topology builds the network layouts the integration tests run on:
// veth pairs with addresses and Soft-RoCE (rdma_rxe) links on them. The VM's
// /init uses it, and so does `rxevm host-setup` on a machine that has rdma_rxe.
package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/vishvananda/netlink"
)

// Endpoint is one rxe device and the netdev under it.
type Endpoint struct {
	RDMA   string    // rxe device, e.g. "rxe0"
	Netdev string    // e.g. "veth0"
	Addr   net.IPNet // the netdev's IPv4 address
	// GIDIndex is the index of the RoCE v2 GID of Addr, found once the link
	// published it (set by Setup and SetupPair). A fresh link fills its GID
	// table in no fixed order: on 6.12 the IPv4 entry is not always 1.
	GIDIndex int
}

// Kind names a layout; see Endpoints.
type Kind string

// The layouts measured to carry RC traffic on Debian's 6.1 kernel.
const (
	// Veth: rxe0 on veth0 and rxe1 on veth1, one namespace. accept_local=1 on
	// both ends keeps ARP and RoCE frames from a local source address from
	// being dropped as martians; no policy routing is needed.
	Veth Kind = "veth"
	// Loopback: the same veth pair with rxe0 on veth0 only; QPs talk to
	// rxe0's own GID.
	Loopback Kind = "loopback"
	// TwoVMA and TwoVMB are the two hosts of a two-VM run: rxe0 on the VM's
	// virtio NIC, 10.99.1.1/24 on A and 10.99.1.2/24 on B, the NICs joined
	// by a QEMU socket netdev.
	TwoVMA Kind = "twovm-a"
	TwoVMB Kind = "twovm-b"
	// None builds nothing but lo: the machine as a host that has not set
	// up Soft-RoCE yet.
	None Kind = "none"
)

// Peer returns the address of the other host in a two-VM layout.
func Peer(k Kind) net.IP {
	switch k {
	case TwoVMA:
		return net.IPv4(10, 99, 1, 2)
	case TwoVMB:
		return net.IPv4(10, 99, 1, 1)
	}
	return nil
}

// Endpoints returns the rxe devices a layout creates.
func Endpoints(k Kind) ([]Endpoint, error) {
	e0 := Endpoint{RDMA: "rxe0", Netdev: "veth0", Addr: ipnet("10.99.0.1/24")}
	e1 := Endpoint{RDMA: "rxe1", Netdev: "veth1", Addr: ipnet("10.99.0.2/24")}
	switch k {
	case Veth, "":
		return []Endpoint{e0, e1}, nil
	case Loopback:
		return []Endpoint{e0}, nil
	case None:
		return nil, nil
	case TwoVMA, TwoVMB:
		nic, err := firstNIC()
		if err != nil {
			return nil, err
		}
		addr := "10.99.1.1/24"
		if k == TwoVMB {
			addr = "10.99.1.2/24"
		}
		return []Endpoint{{RDMA: "rxe0", Netdev: nic, Addr: ipnet(addr)}}, nil
	}
	return nil, fmt.Errorf("topology: unknown kind %q (want %q or %q)", k, Veth, Loopback)
}

func ipnet(s string) net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return *n
}

// Pair is a veth pair with an IPv4 address on each end and an rxe link on
// each end, or on the first only (RDMA[1] == ""), like Veth and Loopback
// but with names and addresses of the caller's choosing, so several can
// coexist in one namespace.
type Pair struct {
	Netdevs [2]string
	Addrs   [2]net.IPNet
	RDMA    [2]string
}

// Endpoints returns the rxe devices the pair carries.
func (p Pair) Endpoints() []Endpoint {
	var eps []Endpoint
	for i := range 2 {
		if p.RDMA[i] != "" {
			eps = append(eps, Endpoint{RDMA: p.RDMA[i], Netdev: p.Netdevs[i], Addr: p.Addrs[i]})
		}
	}
	return eps
}

func defaultPair(k Kind) Pair {
	p := Pair{
		Netdevs: [2]string{"veth0", "veth1"},
		Addrs:   [2]net.IPNet{ipnet("10.99.0.1/24"), ipnet("10.99.0.2/24")},
		RDMA:    [2]string{"rxe0", "rxe1"},
	}
	if k == Loopback {
		p.RDMA[1] = ""
	}
	return p
}

// Setup creates the veth pair, its addresses and the layout's rxe links, then
// waits until every rxe device has published the RoCE v2 GID of its
// netdev's address (a QP cannot reach RTR before that) and records its index
// in the endpoint.
func Setup(k Kind) ([]Endpoint, error) {
	eps, err := Endpoints(k)
	if err != nil {
		return nil, err
	}
	if k == None {
		return nil, loUp()
	}
	if k != TwoVMA && k != TwoVMB {
		return SetupPair(defaultPair(k))
	}
	if err := loUp(); err != nil {
		return nil, err
	}
	for _, e := range eps {
		if err := upWithAddr(e); err != nil {
			return nil, err
		}
	}
	return eps, addRxe(eps)
}

// SetupPair creates p: the veth pair, accept_local=1 and the address on
// both ends (ARP and RoCE frames between two local addresses are otherwise
// dropped as martians), the rxe links, and waits for their IPv4-mapped GIDs.
// On error, what was made is left for TeardownPair.
func SetupPair(p Pair) ([]Endpoint, error) {
	if err := loUp(); err != nil {
		return nil, err
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.Netdevs[0], MTU: 1500}, PeerName: p.Netdevs[1]}
	if err := netlink.LinkAdd(veth); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("topology: add veth pair %s/%s: %w", p.Netdevs[0], p.Netdevs[1], err)
	}
	for i := range 2 {
		if err := upWithAddr(Endpoint{Netdev: p.Netdevs[i], Addr: p.Addrs[i]}); err != nil {
			return nil, err
		}
	}
	eps := p.Endpoints()
	return eps, addRxe(eps)
}

// TeardownPair removes p's rxe links and its veth pair, each link within
// DeleteTimeout. A link something still holds open (a uverbs Context not
// closed) is left in place, and so is the veth pair under it (the kernel
// would wait for the rxe device to let go of it); the error names the
// holders (rxelink.HeldError).
func TeardownPair(p Pair) error {
	errs := delRxe(p.Endpoints())
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if l, err := netlink.LinkByName(p.Netdevs[0]); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("topology: delete %s: %w", p.Netdevs[0], err))
		}
	}
	return errors.Join(errs...)
}

func loUp() error {
	if lo, err := netlink.LinkByName("lo"); err == nil {
		if err := netlink.LinkSetUp(lo); err != nil {
			return fmt.Errorf("topology: lo up: %w", err)
		}
	}
	return nil
}

// GIDTimeout bounds the wait for a new link's RoCE v2 GID.
const GIDTimeout = 15 * time.Second

// DeleteTimeout bounds the removal of one rxe link: the wait for its
// holders to close and the kernel's answer.
const DeleteTimeout = 10 * time.Second

// addRxe adds an rxe link on each endpoint's netdev, waits for the RoCE v2
// GID of its address and records the GID's index.
func addRxe(eps []Endpoint) error {
	for _, e := range eps {
		if err := rxelink.Add(e.RDMA, e.Netdev); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("topology: %w", err)
		}
	}
	for i, e := range eps {
		ip, _ := netip.AddrFromSlice(e.Addr.IP.To4())
		ctx, cancel := context.WithTimeout(context.Background(), GIDTimeout)
		g, err := rxelink.WaitGID(ctx, e.RDMA, ip)
		cancel()
		if err != nil {
			return fmt.Errorf("topology: %w", err)
		}
		eps[i].GIDIndex = g.Index
	}
	return nil
}

func delRxe(eps []Endpoint) []error {
	var errs []error
	for _, e := range eps {
		if !rxelink.Exists(e.RDMA) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), DeleteTimeout)
		if err := rxelink.Delete(ctx, e.RDMA); err != nil {
			errs = append(errs, fmt.Errorf("topology: %w", err))
		}
		cancel()
	}
	return errs
}

// firstNIC finds the VM's virtio network device, waiting briefly for the
// driver to register it.
func firstNIC() (string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return "", fmt.Errorf("topology: list links: %w", err)
		}
		for _, l := range links {
			if l.Type() == "device" && l.Attrs().Name != "lo" && len(l.Attrs().HardwareAddr) == 6 {
				return l.Attrs().Name, nil
			}
		}
		if time.Now().After(deadline) {
			return "", errors.New("topology: no network device besides lo (is virtio_net loaded?)")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func upWithAddr(e Endpoint) error {
	l, err := netlink.LinkByName(e.Netdev)
	if err != nil {
		return fmt.Errorf("topology: %s: %w", e.Netdev, err)
	}
	addr := &netlink.Addr{IPNet: &e.Addr}
	if err := netlink.AddrAdd(l, addr); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("topology: address %s on %s: %w", e.Addr.String(), e.Netdev, err)
	}
	if err := sysctl("net/ipv4/conf/"+e.Netdev+"/accept_local", "1"); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("topology: %s up: %w", e.Netdev, err)
	}
	return nil
}

func sysctl(name, value string) error {
	if err := os.WriteFile(filepath.Join("/proc/sys", name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("topology: sysctl %s=%s: %w", strings.ReplaceAll(name, "/", "."), value, err)
	}
	return nil
}

// MappedGID is the RoCE v2 GID of an IPv4 address as sysfs prints it,
// e.g. 0000:0000:0000:0000:0000:ffff:0a63:0001 for 10.99.0.1.
func MappedGID(ip net.IP) string {
	v6 := ip.To16()
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", v6[i], v6[i+1])
	}
	return b.String()
}

// Teardown removes the rxe links and the veth pair Setup made.
func Teardown(k Kind) error {
	switch k {
	case TwoVMA, TwoVMB:
		eps, err := Endpoints(k)
		if err != nil {
			return err
		}
		return errors.Join(delRxe(eps)...)
	case Veth, Loopback, "":
		return TeardownPair(defaultPair(k))
	case None:
		return nil
	}
	_, err := Endpoints(k)
	return err
}
