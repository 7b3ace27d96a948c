package ucma

import (
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
)

// TestMain fails the package's tests when any of them left a resource to
// the garbage collector.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
