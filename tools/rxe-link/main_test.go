package main

import (
	"bytes"
	"errors"
	"testing"
)

// Command lines rxe-link cannot run are usage errors (exit 2), found before
// anything reaches the kernel.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"frobnicate"},
		{"add", "rxe0"},
		{"add", "rxe0", "eth0", "extra"},
		{"delete"},
		{"gids"},
		{"list", "rxe0"},
		{"load", "rdma_rxe"},
		{"modprobe"},
		{"delete", "-timeout", "soon", "rxe0"},
	} {
		var out bytes.Buffer
		if err := run(&out, args); !errors.Is(err, errUsage) {
			t.Errorf("rxe-link %q: %v, want the usage", args, err)
		}
		if out.Len() != 0 {
			t.Errorf("rxe-link %q printed %q", args, out.String())
		}
	}
}
