package rdmacm

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
)

// deviceByGUID is the uverbs device whose node GUID is guid (as QUERY ADDR
// reports it for a bound id), from sysfs; ok false when none is (an id
// bound to no device, a device already gone).
func deviceByGUID(guid uint64) (d uverbs.Device, ok bool) {
	if guid == 0 {
		return d, false
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return d, false
	}
	for _, d := range devs {
		if d.NodeGUID == guid {
			return d, true
		}
	}
	return d, false
}

// removalError is a DEVICE_REMOVAL event's error: the event, and when the
// device is known the *uverbs.DeviceRemovedError naming it, so that
// errors.Is(err, uverbs.ErrDeviceRemoved) holds as for the device's verbs.
func removalError(ev *EventError, dev uverbs.Device, known bool) error {
	if !known {
		return ev
	}
	return fmt.Errorf("%w: %w", ev, &uverbs.DeviceRemovedError{Device: dev.Name, Path: dev.Path})
}
