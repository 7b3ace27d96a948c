package rdmacm_test

import (
	"flag"
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
)

// TestMain skips the examples that need rxevm's VM (rxe0 on 10.99.0.1,
// rxe1 on 10.99.0.2) on a host without RDMA CM; in the VM (make
// itest-example) they run and their output is checked. It fails the
// package's tests when any of them left a resource to the garbage
// collector.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := os.Stat(ucma.DevicePath); err != nil && flag.Lookup("test.skip").Value.String() == "" {
		flag.Set("test.skip", "^(Example|ExampleResolve|ExampleResolveUD)$")
	}
	os.Exit(leakcheck.Main(m))
}
