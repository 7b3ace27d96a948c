package uverbs

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"strings"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// DriverID is the kernel's uverbs driver id of a device (enum
// rdma_driver_id). Every RDMA_VERBS_IOCTL command must carry it: the kernel
// rejects a mismatch with EINVAL.
type DriverID uint32

// Driver ids this package knows by name.
const (
	DriverUnknown DriverID = 0  // RDMA_DRIVER_UNKNOWN
	DriverRXE     DriverID = 14 // RDMA_DRIVER_RXE
	DriverSIW     DriverID = 18 // RDMA_DRIVER_SIW
)

// String is the driver's short name ("rxe", "siw").
func (d DriverID) String() string {
	switch d {
	case DriverRXE:
		return "rxe"
	case DriverSIW:
		return "siw"
	case DriverUnknown:
		return "unknown"
	}
	return fmt.Sprintf("driver(%d)", uint32(d))
}

// rdma netlink (<rdma/rdma_netlink.h>): sysfs does not show the driver id;
// the "uverbs" char device query of a device answers with it, as
// libibverbs' ibdev_nl.c asks.
const (
	rdmaNLNLDev              = 5  // RDMA_NL_NLDEV
	rdmaNLClientShift        = 10 // RDMA_NL_GET_CLIENT_SHIFT
	rdmaNLDevCmdGet          = 1  // RDMA_NLDEV_CMD_GET
	rdmaNLDevCmdGetChardev   = 15 // RDMA_NLDEV_CMD_GET_CHARDEV
	rdmaNLDevAttrDevIndex    = 1  // RDMA_NLDEV_ATTR_DEV_INDEX, u32
	rdmaNLDevAttrDevName     = 2  // RDMA_NLDEV_ATTR_DEV_NAME, string
	rdmaNLDevAttrChardevType = 69 // RDMA_NLDEV_ATTR_CHARDEV_TYPE, string
	rdmaNLDevAttrUverbsDrvID = 73 // RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, u32 (u64 in older comments)
)

func rdmaNLRequest(cmd, flags int) *nl.NetlinkRequest {
	return nl.NewNetlinkRequest(rdmaNLNLDev<<rdmaNLClientShift|cmd, flags)
}

// driverIDOf asks RDMA netlink for the uverbs driver id of ibdev name: the
// device dump gives its index, the char device query of that index the id.
func driverIDOf(name string) (DriverID, error) {
	index, err := rdmaDevIndex(name)
	if err != nil {
		return DriverUnknown, err
	}
	req := rdmaNLRequest(rdmaNLDevCmdGetChardev, 0)
	req.AddData(nl.NewRtAttr(rdmaNLDevAttrDevIndex, nl.Uint32Attr(index)))
	req.AddData(nl.NewRtAttr(rdmaNLDevAttrChardevType, nl.ZeroTerminated("uverbs")))
	msgs, err := req.Execute(unix.NETLINK_RDMA, 0)
	if err != nil {
		return DriverUnknown, fmt.Errorf("uverbs: rdma netlink chardev query of %s: %w", name, err)
	}
	for _, m := range msgs {
		attrs, err := nl.ParseRouteAttr(m)
		if err != nil {
			return DriverUnknown, fmt.Errorf("uverbs: rdma netlink: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type != rdmaNLDevAttrUverbsDrvID {
				continue
			}
			switch len(a.Value) {
			case 4:
				return DriverID(binary.NativeEndian.Uint32(a.Value)), nil
			case 8:
				return DriverID(binary.NativeEndian.Uint64(a.Value)), nil
			}
		}
	}
	return DriverUnknown, fmt.Errorf("uverbs: rdma netlink gives no driver id for %s: %w", name, ErrNotSupported)
}

// rdmaDevIndex finds the ibdev index of name in the RDMA device dump.
func rdmaDevIndex(name string) (uint32, error) {
	msgs, err := rdmaNLRequest(rdmaNLDevCmdGet, unix.NLM_F_DUMP).Execute(unix.NETLINK_RDMA, 0)
	if err != nil {
		return 0, fmt.Errorf("uverbs: rdma netlink device dump: %w", err)
	}
	for _, m := range msgs {
		attrs, err := nl.ParseRouteAttr(m)
		if err != nil {
			return 0, fmt.Errorf("uverbs: rdma netlink: %w", err)
		}
		var devName string
		var index uint32
		var haveIndex bool
		for _, a := range attrs {
			switch {
			case a.Attr.Type == rdmaNLDevAttrDevName:
				devName = strings.TrimRight(string(a.Value), "\x00")
			case a.Attr.Type == rdmaNLDevAttrDevIndex && len(a.Value) == 4:
				index, haveIndex = binary.NativeEndian.Uint32(a.Value), true
			}
		}
		if devName == name && haveIndex {
			return index, nil
		}
	}
	return 0, fmt.Errorf("uverbs: rdma netlink knows no device %q: %w", name, fs.ErrNotExist)
}
