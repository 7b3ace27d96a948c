package waitprocs

import (
	"runtime"
	"testing"
)

// One P becomes two; an explicit GOMAXPROCS in the environment, and more
// Ps than two, are left alone.
func TestEnsure(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct {
		env       string
		set, want int
	}{{"", 1, 2}, {"1", 1, 1}, {"", 4, 4}} {
		t.Setenv("GOMAXPROCS", c.env)
		runtime.GOMAXPROCS(c.set)
		Ensure()
		if got := runtime.GOMAXPROCS(0); got != c.want {
			t.Errorf("GOMAXPROCS=%q, %d Ps: Ensure left %d, want %d", c.env, c.set, got, c.want)
		}
	}
}
