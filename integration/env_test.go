//go:build integration

package integration

import (
	"os"
	"testing"
)

// TestHarnessSelfcheck fails on purpose when RXEVM_SELFCHECK=1, so that
// `make itest-selfcheck` can prove a failing test fails the whole run.
func TestHarnessSelfcheck(t *testing.T) {
	if os.Getenv("RXEVM_SELFCHECK") != "1" {
		t.Skip("runs only under make itest-selfcheck (RXEVM_SELFCHECK=1)")
	}
	t.Fatal("deliberate failure seen by the harness")
}
