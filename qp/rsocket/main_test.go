package rsocket_test

import (
	"flag"
	"os"
	"testing"
)

// cmDevice is the RDMA CM's character device (module rdma_ucm).
const cmDevice = "/dev/infiniband/rdma_cm"

// TestMain skips the example, which needs rxevm's VM (rxe0 on 10.99.0.1,
// rxe1 on 10.99.0.2), on a host without RDMA CM; in the VM it runs and
// its output is checked.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := os.Stat(cmDevice); err != nil && flag.Lookup("test.skip").Value.String() == "" {
		flag.Set("test.skip", "^Example$")
	}
	os.Exit(m.Run())
}
