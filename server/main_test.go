package server

import (
	"flag"
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
)

// TestMain skips the example that needs rxevm's VM (rxe0 on 10.99.0.1,
// rxe1 on 10.99.0.2) on a host without it; in the VM (make itest-example)
// it runs and its output is checked. It fails the package's tests when any
// of them left a resource to the garbage collector.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := uverbs.DeviceByName("rxe1"); err != nil && flag.Lookup("test.skip").Value.String() == "" {
		flag.Set("test.skip", "^ExampleServer_Serve$")
	}
	os.Exit(leakcheck.Main(m))
}
