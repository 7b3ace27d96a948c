package uverbs

import "fmt"

// DriverID is the kernel's uverbs driver id of a device (enum
// rdma_driver_id). Every RDMA_VERBS_IOCTL command must carry it: the kernel
// rejects a mismatch with EINVAL. Discovery knows it from sysfs for the
// drivers named here (see Device.Driver), as a provider library knows the id
// of the driver it binds to.
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
