package topology

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Listening reports whether a TCP socket in this network namespace listens
// on port, on any address. It reads /proc/net/tcp and tcp6 instead of
// connecting: the servers waited for here (QEMU's socket netdev, the
// pingpong tools) take the first connection as their peer.
func Listening(port int) (bool, error) {
	want := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if os.IsNotExist(err) {
			continue // no IPv6
		}
		if err != nil {
			return false, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ...; st 0A is LISTEN.
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				f.Close()
				return true, nil
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// RDMA netlink's resource dump of CM IDs (<rdma/rdma_netlink.h>), and the
// listening state of a CM ID (enum rdma_cm_state, drivers/infiniband/core/
// cma_priv.h; include/rdma/rdma_cm.h before 5.4).
const (
	nldevCmdResCMIDGet          = 11 // RDMA_NLDEV_CMD_RES_CM_ID_GET
	nldevAttrResState           = 27 // RDMA_NLDEV_ATTR_RES_STATE, u8
	nldevAttrResCMID            = 30 // RDMA_NLDEV_ATTR_RES_CM_ID, nested table
	nldevAttrResCMIDEntry       = 31 // RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY, nested
	nldevAttrResSrcAddr         = 33 // RDMA_NLDEV_ATTR_RES_SRC_ADDR, sockaddr_storage
	cmStateListen         uint8 = 8  // RDMA_CM_LISTEN
)

// CMListening reports whether an RDMA CM ID listens on port, on addr or on
// the wildcard address (an invalid addr matches any address). It asks the
// kernel's resource tracking over RDMA netlink, as `rdma resource show
// cm_id` does, so it sees every process's listeners without connecting: a
// probe connection would be taken for the client by servers such as
// perftest's, and RDMA CM listeners have no TCP socket for Listening to
// find. A wildcard listener shows once per RDMA device, which the kernel
// dumps one at a time.
func CMListening(port int, addr netip.Addr) (bool, error) {
	links, err := netlink.RdmaLinkList()
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return false, fmt.Errorf("topology: rdma link list: %w", err)
	}
	for _, l := range links {
		req := nl.NewNetlinkRequest(nl.RDMA_NL_NLDEV<<nl.RDMA_NL_GET_CLIENT_SHIFT|nldevCmdResCMIDGet, unix.NLM_F_DUMP)
		req.AddData(nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_DEV_INDEX, nl.Uint32Attr(l.Attrs.Index)))
		msgs, err := req.Execute(unix.NETLINK_RDMA, 0)
		// An interrupted dump is read as far as it went: the caller polls.
		switch {
		case errors.Is(err, unix.EINVAL):
			continue // the kernel knows no device of that index: removed since the list
		case err != nil && !errors.Is(err, netlink.ErrDumpInterrupted):
			return false, fmt.Errorf("topology: rdma resource show cm_id dev %s: %w", l.Attrs.Name, err)
		}
		ok, err := cmListens(msgs, port, addr)
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// cmListens decodes the messages of an RDMA_NLDEV_CMD_RES_CM_ID_GET dump
// (attributes only: RDMA netlink has no family header) and reports whether
// one of their CM IDs is in RDMA_CM_LISTEN on port and addr (see
// CMListening).
func cmListens(msgs [][]byte, port int, addr netip.Addr) (bool, error) {
	for _, m := range msgs {
		top, err := nl.ParseRouteAttr(m)
		if err != nil {
			return false, fmt.Errorf("topology: cm_id dump: %w", err)
		}
		for _, table := range top {
			if table.Attr.Type&nl.NLA_TYPE_MASK != nldevAttrResCMID {
				continue
			}
			entries, err := nl.ParseRouteAttr(table.Value)
			if err != nil {
				return false, fmt.Errorf("topology: cm_id table: %w", err)
			}
			for _, e := range entries {
				if e.Attr.Type&nl.NLA_TYPE_MASK != nldevAttrResCMIDEntry {
					continue
				}
				attrs, err := nl.ParseRouteAttr(e.Value)
				if err != nil {
					return false, fmt.Errorf("topology: cm_id entry: %w", err)
				}
				var listen bool
				var src netip.AddrPort
				for _, a := range attrs {
					switch a.Attr.Type & nl.NLA_TYPE_MASK {
					case nldevAttrResState:
						listen = len(a.Value) == 1 && a.Value[0] == cmStateListen
					case nldevAttrResSrcAddr:
						src = sockaddrPort(a.Value)
					}
				}
				if listen && src.IsValid() && int(src.Port()) == port &&
					(!addr.IsValid() || src.Addr().IsUnspecified() || src.Addr() == addr.Unmap()) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// sockaddrPort reads an IPv4 or IPv6 address and port from a struct
// sockaddr_storage; other families (AF_IB) and short values give the zero
// AddrPort.
func sockaddrPort(b []byte) netip.AddrPort {
	if len(b) < 2 {
		return netip.AddrPort{}
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET: // struct sockaddr_in
		if len(b) >= unix.SizeofSockaddrInet4 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:]))
		}
	case unix.AF_INET6: // struct sockaddr_in6
		if len(b) >= unix.SizeofSockaddrInet6 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), binary.BigEndian.Uint16(b[2:]))
		}
	}
	return netip.AddrPort{}
}
