package main

import (
	"fmt"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

// The renderings below are ibv_devinfo's (libibverbs/examples/devinfo.c):
// the same words for the same numbers, "invalid …" for numbers it does not
// know.

func portStateName(s uverbs.PortState) string {
	switch s {
	case uverbs.PortDown:
		return "PORT_DOWN"
	case uverbs.PortInit:
		return "PORT_INIT"
	case uverbs.PortArmed:
		return "PORT_ARMED"
	case uverbs.PortActive:
		return "PORT_ACTIVE"
	}
	return "invalid state"
}

func physStateName(s uint8) string {
	names := [...]string{1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING",
		5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"}
	if int(s) < len(names) && names[s] != "" {
		return names[s]
	}
	return "invalid physical state"
}

func atomicCapName(c uint32) string {
	switch c {
	case 0:
		return "ATOMIC_NONE"
	case 1:
		return "ATOMIC_HCA"
	case 2:
		return "ATOMIC_GLOB"
	}
	return "invalid atomic capability"
}

func mtuName(m uverbs.MTU) string {
	if b := m.Bytes(); b != 0 {
		return fmt.Sprint(b)
	}
	return "invalid MTU"
}

// widthName is the lane count of an IB_WIDTH_* value.
func widthName(w uint8) string {
	switch w {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

// speedName is the per-lane rate of an IB_SPEED_* value (active_speed_ex
// included, whose values extend active_speed's).
func speedName(s uint32) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	case 256:
		return "200.0 Gbps"
	}
	return "invalid speed"
}

// vlName is the number of data VLs of a max_vl_num encoding.
func vlName(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}

func linkLayerName(l uverbs.LinkLayer) string {
	switch l {
	case uverbs.LinkLayerUnspecified:
		return "Unspecified"
	case uverbs.LinkLayerInfiniBand:
		return "InfiniBand"
	case uverbs.LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// flagName is one named bit of a flag word.
type flagName struct {
	bit  uint64
	name string
}

// deviceCapNames are the 32-bit device capability flags
// (IBV_DEVICE_*), in the order ibv_devinfo lists them.
var deviceCapNames = []flagName{
	{1 << 0, "RESIZE_MAX_WR"}, {1 << 1, "BAD_PKEY_CNTR"}, {1 << 2, "BAD_QKEY_CNTR"}, {1 << 3, "RAW_MULTI"},
	{1 << 4, "AUTO_PATH_MIG"}, {1 << 5, "CHANGE_PHY_PORT"}, {1 << 6, "UD_AV_PORT_ENFORCE"},
	{1 << 7, "CURR_QP_STATE_MOD"}, {1 << 8, "SHUTDOWN_PORT"}, {1 << 9, "INIT_TYPE"},
	{1 << 10, "PORT_ACTIVE_EVENT"}, {1 << 11, "SYS_IMAGE_GUID"}, {1 << 12, "RC_RNR_NAK_GEN"},
	{1 << 13, "SRQ_RESIZE"}, {1 << 14, "N_NOTIFY_CQ"}, {1 << 17, "MEM_WINDOW"}, {1 << 18, "UD_IP_CSUM"},
	{1 << 20, "XRC"}, {1 << 21, "MEM_MGT_EXTENSIONS"}, {1 << 23, "MEM_WINDOW_TYPE_2A"},
	{1 << 24, "MEM_WINDOW_TYPE_2B"}, {1 << 25, "RC_IP_CSUM"}, {1 << 26, "RAW_IP_CSUM"},
	{1 << 29, "MANAGED_FLOW_STEERING"},
}

// deviceCapExNames are the bits above 31 of device_cap_flags_ex that
// ibv_devinfo names; it calls the others unknown (6.12's ATOMIC_WRITE and
// FLUSH bits among them).
var deviceCapExNames = []flagName{{1 << 34, "RAW_SCATTER_FCS"}, {1 << 36, "PCI_WRITE_END_PADDING"}}

var odpGeneralNames = []flagName{{1 << 0, "ODP_SUPPORT"}, {1 << 1, "ODP_SUPPORT_IMPLICIT"}}

var odpTransportNames = []flagName{
	{1 << 0, "SUPPORT_SEND"}, {1 << 1, "SUPPORT_RECV"}, {1 << 2, "SUPPORT_WRITE"},
	{1 << 3, "SUPPORT_READ"}, {1 << 4, "SUPPORT_ATOMIC"}, {1 << 5, "SUPPORT_SRQ"},
}

var rawPacketCapNames = []flagName{
	{1 << 0, "C-VLAN stripping offload"}, {1 << 1, "Scatter FCS offload"},
	{1 << 2, "IP csum offload"}, {1 << 3, "Delay drop"},
}

// qpTypeBits are the QP types ibv_devinfo names in supported_qpts masks
// (bit n: QP type n; UD is 4, RAW_PACKET 8).
var qpTypeBits = []flagName{{1 << 8, "SUPPORT_RAW_PACKET"}, {1 << 4, "SUPPORT_UD"}}

// flagLines writes one line per named bit set in v, then, unless unknown
// is nil, the bits no name covers as "Unknown flags: 0x…" in the width
// unknown formats them.
func flagLines(b *strings.Builder, v uint64, names []flagName, unknown func(uint64) string) {
	var known uint64
	for _, f := range names {
		known |= f.bit
		if v&f.bit != 0 {
			b.WriteString("\t\t\t\t\t" + f.name + "\n")
		}
	}
	if rest := v &^ known; rest != 0 && unknown != nil {
		b.WriteString("\t\t\t\t\tUnknown flags: 0x" + unknown(rest) + "\n")
	}
}

// hexUpper is printf's %X.
func hexUpper(v uint64) string { return fmt.Sprintf("%X", v) }
