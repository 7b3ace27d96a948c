package uverbs

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// NodeType is the kind of RDMA node a device is (enum ibv_node_type), from
// sysfs node_type ("1: CA" for rxe).
type NodeType int

// Node types.
const (
	NodeUnknown     NodeType = -1
	NodeCA          NodeType = 1
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

// Transport is the transport a node type implies (enum
// ibv_transport_type): InfiniBand (RoCE included) for channel adapters,
// switches and routers.
type Transport int

// Transports.
const (
	TransportUnknown     Transport = -1
	TransportIB          Transport = 0
	TransportIWARP       Transport = 1
	TransportUSNIC       Transport = 2
	TransportUSNICUDP    Transport = 3
	TransportUnspecified Transport = 4
)

// Transport returns the transport of a node of type t, as libibverbs
// derives it.
func (t NodeType) Transport() Transport {
	switch t {
	case NodeCA, NodeSwitch, NodeRouter:
		return TransportIB
	case NodeRNIC:
		return TransportIWARP
	case NodeUSNIC:
		return TransportUSNIC
	case NodeUSNICUDP:
		return TransportUSNICUDP
	case NodeUnspecified:
		return TransportUnspecified
	}
	return TransportUnknown
}

// String names the transport as ibv_devinfo does ("InfiniBand", "iWARP").
func (t Transport) String() string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	case TransportUnspecified:
		return "unspecified"
	}
	return "invalid transport"
}

// String is the sysfs name of the node type ("CA", "RNIC").
func (t NodeType) String() string {
	switch t {
	case NodeCA:
		return "CA"
	case NodeSwitch:
		return "SWITCH"
	case NodeRouter:
		return "ROUTER"
	case NodeRNIC:
		return "RNIC"
	case NodeUSNIC:
		return "usNIC"
	case NodeUSNICUDP:
		return "usNIC UDP"
	case NodeUnspecified:
		return "unspecified"
	}
	return fmt.Sprintf("NodeType(%d)", int(t))
}

// parseNodeType reads sysfs node_type: a number, then ": " and a name.
// Anything else is NodeUnknown.
func parseNodeType(s string) NodeType {
	num, _, _ := strings.Cut(strings.TrimSpace(s), ":")
	n, err := strconv.Atoi(num)
	if err != nil || n < int(NodeCA) || n > int(NodeUnspecified) {
		return NodeUnknown
	}
	return NodeType(n)
}

// sysfsExtras fills the attributes of d that only sysfs has: its node type
// and board id (empty when the driver has none, as rxe).
func (s discovery) sysfsExtras(d *Device) {
	dir := filepath.Join(s.sysfs, "class", "infiniband", d.Name)
	nt, err := readString(filepath.Join(dir, "node_type"))
	d.NodeType = NodeUnknown
	if err == nil {
		d.NodeType = parseNodeType(nt)
	}
	d.BoardID, _ = readString(filepath.Join(dir, "board_id"))
}
