package uverbs

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// KernelIndex is the kernel's index of the RDMA device (what
// ibv_get_device_index returns, RDMA_NLDEV_ATTR_DEV_INDEX), asked of RDMA
// netlink when called: sysfs does not show it, and Devices and Open do
// without netlink. Without RDMA netlink (an old kernel, a sandbox) the
// error matches ErrNotSupported.
func (d Device) KernelIndex() (uint32, error) {
	l, err := netlink.RdmaLinkByName(d.Name)
	if err != nil {
		return 0, fmt.Errorf("uverbs: %s: device index from RDMA netlink: %w (%w)", d.Name, ErrNotSupported, err)
	}
	return l.Attrs.Index, nil
}
