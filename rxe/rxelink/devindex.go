package rxelink

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// DeviceIndex is the kernel's index of the RDMA device name (what
// ibv_get_device_index returns, RDMA_NLDEV_ATTR_DEV_INDEX), asked of RDMA
// netlink: sysfs does not show it. It lives here, with the package's other
// RDMA netlink requests, so that the verbs packages link no netlink
// library. Without RDMA netlink (an old kernel, a sandbox) the error
// matches errors.ErrUnsupported (uverbs.ErrNotSupported).
func DeviceIndex(name string) (uint32, error) {
	l, err := netlink.RdmaLinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("rxelink: %s: device index from RDMA netlink: %w (%w)", name, errors.ErrUnsupported, err)
	}
	return l.Attrs.Index, nil
}
