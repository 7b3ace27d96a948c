package uverbs

import (
	"fmt"
	"unsafe"
)

// PortState is enum ib_port_state.
type PortState uint8

// Port states.
const (
	PortNOP         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

// String is the IB_PORT_* name without its prefix.
func (s PortState) String() string {
	switch s {
	case PortNOP:
		return "NOP"
	case PortDown:
		return "DOWN"
	case PortInit:
		return "INIT"
	case PortArmed:
		return "ARMED"
	case PortActive:
		return "ACTIVE"
	case PortActiveDefer:
		return "ACTIVE_DEFER"
	}
	return fmt.Sprintf("PortState(%d)", uint8(s))
}

// MTU is enum ib_mtu: 1 = 256 bytes ... 5 = 4096 bytes.
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, 0 if invalid.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// String is the MTU in bytes.
func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("MTU(%d)", uint8(m))
}

// LinkLayer is the port's link layer (IBV_LINK_LAYER_*).
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
)

// String names the link layer ("InfiniBand", "Ethernet").
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified:
		return "unspecified"
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return fmt.Sprintf("LinkLayer(%d)", uint8(l))
}

// PortAttr is what QUERY_PORT reports.
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTableLen   int
	PortCapFlags  uint32 // IB_UVERBS_PCF_*
	MaxMsgSize    uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTableLen  int
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     LinkLayer
	GRHRequired   bool // IB_UVERBS_QPF_GRH_REQUIRED: every address vector needs a GRH (RoCE)
	InitTypeReply uint8

	// Only the ioctl form of QUERY_PORT reports these; they are zero when
	// the kernel answered the write() command.
	PortCapFlags2 uint16 // IB_UVERBS_PCF2_*
	ActiveSpeedEx uint32 // the active speed where ActiveSpeed's 8 bits are too few; 0 if unset
}

const portFlagGRHRequired = 1 << 0 // IB_UVERBS_QPF_GRH_REQUIRED

// QueryPort returns the attributes of port (1-based), through
// UVERBS_METHOD_QUERY_PORT as libibverbs does, or the write() command
// QUERY_PORT when the kernel lacks the method or the driver id is unknown.
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	var ex queryPortRespEx
	done, err := c.tryIoctl(ioctlQueryPort, "query_port", func(driverID uint32) *ioctlBuf {
		return queryPortIoctl(driverID, port, &ex)
	})
	if done {
		if err != nil {
			return PortAttr{}, err
		}
		return portAttrFromEx(&ex), nil
	}
	var resp respFrame[queryPortResp]
	var f writeFrame[queryPortCmd]
	f.req = queryPortCmd{Response: resp.ptr(), PortNum: port}
	if err := execWrite(c, "query_port", cmdQueryPort, &f, &resp, nil, 0); err != nil {
		return PortAttr{}, err
	}
	return portAttrFrom(&resp.resp), nil
}

func portAttrFrom(r *queryPortResp) PortAttr {
	return PortAttr{
		State:         PortState(r.State),
		MaxMTU:        MTU(r.MaxMTU),
		ActiveMTU:     MTU(r.ActiveMTU),
		GIDTableLen:   int(r.GIDTblLen),
		PortCapFlags:  r.PortCapFlags,
		MaxMsgSize:    r.MaxMsgSz,
		BadPKeyCntr:   r.BadPKeyCntr,
		QKeyViolCntr:  r.QKeyViolCntr,
		PKeyTableLen:  int(r.PKeyTblLen),
		LID:           r.LID,
		SMLID:         r.SMLID,
		LMC:           r.LMC,
		MaxVLNum:      r.MaxVLNum,
		SMSL:          r.SMSL,
		SubnetTimeout: r.SubnetTimeout,
		ActiveWidth:   r.ActiveWidth,
		ActiveSpeed:   r.ActiveSpeed,
		PhysState:     r.PhysState,
		LinkLayer:     LinkLayer(r.LinkLayer),
		GRHRequired:   r.Flags&portFlagGRHRequired != 0,
		InitTypeReply: r.InitTypeReply,
	}
}

func portAttrFromEx(r *queryPortRespEx) PortAttr {
	a := portAttrFrom(&r.Legacy)
	a.PortCapFlags2 = r.PortCapFlags2
	a.ActiveSpeedEx = r.ActiveSpeedEx
	return a
}

// queryPortIoctl builds UVERBS_METHOD_QUERY_PORT as libibverbs does
// (ibv_cmd_query_port): the port number inline, the extended response out.
func queryPortIoctl(driverID uint32, port uint8, resp *queryPortRespEx) *ioctlBuf {
	b := newIoctl(objectDevice, methodQueryPort, driverID)
	b.constIn(attrQueryPortPortNum, uint64(port))
	b.ptrOut(attrQueryPortResp, unsafe.Pointer(resp), int(unsafe.Sizeof(*resp)))
	return b
}
