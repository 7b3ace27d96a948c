package rxe

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
)

// checkDriver refuses a device whose kernel driver is not rdma_rxe: its
// driver response and ring layout are not rxe's, so mapping "rings" from it
// would read garbage. The error names the driver and wraps ErrNotSupported.
func checkDriver(verb string, d uverbs.Device) error {
	if d.DriverID == uverbs.DriverRXE {
		return nil
	}
	driver := d.Driver
	if driver == "" {
		driver = "an unknown driver"
	}
	return fmt.Errorf("rxe: %s: %s is driven by %s, not rxe: %w", verb, d.Name, driver, ErrNotSupported)
}
