package rxe

import (
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// Rings are created only on rdma_rxe devices; any other driver is refused
// by name (the drivers as uverbs' discovery reports them from sysfs).
func TestCheckDriver(t *testing.T) {
	if err := checkDriver("create_cq", uverbs.Device{Name: "rxe0", Driver: "rxe", DriverID: uverbs.DriverRXE}); err != nil {
		t.Errorf("rxe device refused: %v", err)
	}
	for _, d := range []uverbs.Device{
		{Name: "mlx5_0", Driver: "mlx5_core"},
		{Name: "siw0", Driver: "siw", DriverID: uverbs.DriverSIW},
		{Name: "odd0"},
	} {
		for _, verb := range []string{"create_cq", "create_qp"} {
			err := checkDriver(verb, d)
			if !errors.Is(err, ErrNotSupported) || !errors.Is(err, uverbs.ErrNotSupported) {
				t.Errorf("%s on %s (%q) = %v, want ErrNotSupported", verb, d.Name, d.Driver, err)
				continue
			}
			name := d.Driver
			if name == "" {
				name = "unknown driver"
			}
			if msg := err.Error(); !strings.Contains(msg, verb) || !strings.Contains(msg, d.Name) || !strings.Contains(msg, name) {
				t.Errorf("%s on %s: error %q does not name the verb, device and driver", verb, d.Name, msg)
			}
		}
	}
}
