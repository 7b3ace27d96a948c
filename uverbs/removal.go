package uverbs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"weak"

	"golang.org/x/sys/unix"
)

// ErrDeviceRemoved is matched (errors.Is) by what a Context and the objects
// under it return once the device is found removed (`rdma link delete`, or
// its netdev deleted): Context.Err, WaitAsyncEvent, the provider's posts
// and polls of an empty CQ, completion channel waits. The error is a
// *DeviceRemovedError, which names the device. Only closing every Context
// on the device (and unmapping its rings, which Close does) lets the
// kernel finish the removal.
var ErrDeviceRemoved = errors.New("uverbs: device removed")

// DeviceRemovedError says which device went away.
type DeviceRemovedError struct {
	Device string // ibdev name, e.g. "rxe0"
	Path   string // its uverbs character device
}

// Error names the device and what its user must do.
func (e *DeviceRemovedError) Error() string {
	return "uverbs: device " + e.Device + " removed (" + e.Path + " is gone): close every Context on it so that the removal can finish"
}

// Is makes errors.Is(err, ErrDeviceRemoved) true.
func (e *DeviceRemovedError) Is(target error) bool { return target == ErrDeviceRemoved }

// PresenceInterval is how often a Context looks whether its device is
// still registered. rdma_rxe cannot disassociate a context: the kernel's
// removal waits until every uverbs fd of the device is closed and sends
// nothing on them (no DEVICE_FATAL; 6.12's RDMA netlink UNREGISTER event
// comes only after that wait). What it does first is delete the uverbs
// class device (ib_uverbs_remove_one: cdev_device_del, then the wait), so
// its sysfs entry going away is the first sign the removal has begun.
var PresenceInterval = 500 * time.Millisecond

// removal is a Context's view of its device's presence.
type removal struct {
	err atomic.Pointer[DeviceRemovedError]
	// fd is an eventfd written once when the device is found removed and
	// never drained, so that every wait watching it wakes, now and later.
	fd    *fileDesc
	sysfs string // .../class/infiniband_verbs/uverbsN/dev
	rdev  uint64 // the device number of the open command fd
	timer *time.Timer
}

// Err returns nil while the device is there and a *DeviceRemovedError once
// it was found removed. It is one atomic load and allocates nothing, for
// providers to check on their post and poll paths.
func (c *Context) Err() error {
	if e := c.removal.err.Load(); e != nil {
		return e
	}
	return nil
}

// RemovalFD returns an fd that becomes readable, and stays so, once the
// device is found removed; for a caller's own poll or epoll next to its
// completion channel. The Context owns it: it is valid until Close. -1
// when the Context does not watch its device (see Open).
func (c *Context) RemovalFD() int { return c.removal.fd.int() }

// watchPresence starts looking for the device's removal every
// PresenceInterval. It does nothing when the device's sysfs entry cannot
// be matched to the open fd (a test's fake tree, a kernel without sysfs):
// a false alarm would be worse than none.
func (c *Context) watchPresence() error {
	var st unix.Stat_t
	if err := unix.Fstat(c.fd.int(), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return nil
	}
	dev := filepath.Join(c.sysfs, "class", "infiniband_verbs", "uverbs"+strconv.Itoa(c.dev.Index), "dev")
	if present, err := devPresent(dev, st.Rdev); err != nil || !present {
		return nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("uverbs: get_context: eventfd: %w", err)
	}
	c.removal.fd = ownFD(efd, "uverbs.Context removal eventfd")
	c.removal.sysfs, c.removal.rdev = dev, st.Rdev
	// The timer holds the Context weakly, so that an unclosed Context is
	// still collected (and its leak reported).
	w := weak.Make(c)
	var check func()
	check = func() {
		c := w.Value()
		if c == nil || !c.checkPresence() {
			return
		}
		c.removal.timer.Reset(PresenceInterval)
	}
	t := time.AfterFunc(time.Hour, check)
	t.Stop()
	c.removal.timer = t // before the first check reads it
	t.Reset(PresenceInterval)
	return nil
}

// checkPresence marks the device removed when its sysfs entry is gone or
// names another device, and reports whether to look again.
func (c *Context) checkPresence() bool {
	if !c.gate.enter() {
		return false
	}
	defer c.gate.leave()
	present, err := devPresent(c.removal.sysfs, c.removal.rdev)
	if err != nil || present {
		return true // an unreadable entry is no proof of removal
	}
	c.markRemoved()
	return false
}

// markRemoved records the removal and wakes every wait that watches the
// removal fd. Called inside the gate.
func (c *Context) markRemoved() {
	if !c.removal.err.CompareAndSwap(nil, &DeviceRemovedError{Device: c.dev.Name, Path: c.dev.Path}) {
		return
	}
	unix.Write(c.removal.fd.int(), one[:])
}

// one is the eventfd count 1.
var one = [8]byte{1}

// devPresent reports whether the sysfs dev file (major:minor) exists and
// holds rdev. A missing file is absence; other errors are returned.
func devPresent(path string, rdev uint64) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	maj, min, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	if !ok {
		return false, fmt.Errorf("uverbs: %s: %q is not major:minor", path, b)
	}
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(min, 10, 32)
	if err1 != nil || err2 != nil {
		return false, fmt.Errorf("uverbs: %s: %q is not major:minor", path, b)
	}
	return unix.Mkdev(uint32(ma), uint32(mi)) == rdev, nil
}

// stop stops the watch and closes the removal fd; Close calls it once no
// wait can be polling the fd.
func (r *removal) stop() error {
	if r.timer != nil {
		r.timer.Stop()
	}
	return r.fd.close()
}
