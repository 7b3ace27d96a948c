package main

import (
	"debug/buildinfo"
	"fmt"
	"os"

	"github.com/pureverbs/pureverbs/tools/rxevm/internal/vm"
)

// envCPeers puts pureverbs' C peers in every image (1) or in none (0),
// instead of deciding by the binary under test.
const envCPeers = "RXEVM_CPEERS"

// wantCPeers reports whether a run's image carries pureverbs' own C peers
// (vm.CPeerDir). Only pureverbs' tests run them, and building them needs gcc,
// so they are built for a test binary of the pureverbs module and for no
// other (an outside module's tests, `rxevm run` with binary ""), unless
// RXEVM_CPEERS says otherwise.
func wantCPeers(binary string) (bool, error) {
	switch v := os.Getenv(envCPeers); v {
	case "1":
		return true, nil
	case "0":
		return false, nil
	case "":
	default:
		return false, fmt.Errorf("rxevm: %s=%q: want 1 or 0", envCPeers, v)
	}
	if binary == "" {
		return false, nil
	}
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return false, fmt.Errorf("rxevm: %s: %w", binary, err)
	}
	return bi.Main.Path == vm.ModulePath, nil
}
