package rxelink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
)

// sysfs is where the kernel's device classes are; tests point it at a
// tree of their own.
var sysfs = "/sys"

// Link is one rxe device and the network device it is bound to.
type Link struct {
	Name   string // RDMA device, e.g. "rxe0"
	Netdev string // e.g. "eth0"; "" when the kernel no longer names one
}

// Add creates the rxe link name on netdev, like `rdma link add NAME type
// rxe netdev NETDEV`. The error matches os.ErrExist (EEXIST) when a device
// of that name already exists, and ENODEV when netdev does not.
func Add(name, netdev string) error {
	if err := netlink.RdmaLinkAdd(name, "rxe", netdev); err != nil {
		return fmt.Errorf("rxelink: rdma link add %s type rxe netdev %s: %w", name, netdev, err)
	}
	return nil
}

// List returns the rxe links, sorted by name (other RDMA devices are left
// out).
func List() ([]Link, error) {
	dir := filepath.Join(sysfs, "class/infiniband")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no RDMA core loaded: no links
	}
	if err != nil {
		return nil, fmt.Errorf("rxelink: list links: %w", err)
	}
	var links []Link
	for _, e := range ents {
		if !isRxe(e.Name()) {
			continue
		}
		links = append(links, Link{Name: e.Name(), Netdev: parent(e.Name())})
	}
	sort.Slice(links, func(i, j int) bool { return links[i].Name < links[j].Name })
	return links, nil
}

// isRxe tells an rxe device by the "parent" attribute rxe gives its
// devices (the netdev's name), which hardware drivers do not have.
func isRxe(name string) bool {
	_, err := os.Stat(filepath.Join(sysfs, "class/infiniband", name, "parent"))
	return err == nil
}

// parent reads the netdev an rxe device is bound to.
func parent(name string) string {
	b, err := os.ReadFile(filepath.Join(sysfs, "class/infiniband", name, "parent"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Exists reports whether an RDMA device called name exists.
func Exists(name string) bool {
	_, err := os.Stat(filepath.Join(sysfs, "class/infiniband", name))
	return err == nil
}

// deleteLink is the netlink call Delete makes; tests replace it.
var deleteLink = netlink.RdmaLinkDel

// Delete removes the rxe link name, like `rdma link delete NAME`, without
// ever blocking past ctx. The kernel does not return from the deletion
// while any process holds the device's uverbs file open or mapped (a
// Context not closed), so Delete first waits, until ctx is done, for the
// holders /proc shows to go away; if they do not, it returns a *HeldError
// naming them (errors.Is(err, ErrHeld)) and leaves the link in place. A
// holder that is this process fails at once: it cannot close while Delete
// waits. Should the kernel still not answer by the deadline, Delete returns
// an error wrapping ctx.Err(); the netlink call goes on in the background and
// finishes when the last holder closes.
func Delete(ctx context.Context, name string) error {
	if !Exists(name) {
		return fmt.Errorf("rxelink: rdma link delete %s: %w", name, os.ErrNotExist)
	}
	if err := waitUnheld(ctx, name); err != nil {
		return err
	}
	done := make(chan error, 1)
	del := deleteLink // read here: the goroutine may outlive Delete
	go func() { done <- del(name) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("rxelink: rdma link delete %s: %w", name, err)
		}
		return nil
	case <-ctx.Done():
		h, _ := Holders(name)
		return fmt.Errorf("rxelink: rdma link delete %s: no answer from the kernel by the deadline (it waits for every open uverbs file of the device; holders now: %s): %w",
			name, describe(h), ctx.Err())
	}
}

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
