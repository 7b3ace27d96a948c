package main

import (
	"os"
	"os/exec"
	"testing"
)

// pureverbs' own test binaries get the C peers, another module's binaries
// (here the go command's) and `rxevm run` do not, and RXEVM_CPEERS decides
// over both.
func TestWantCPeers(t *testing.T) {
	own, err := os.Executable() // this test binary, of the pureverbs module
	if err != nil {
		t.Fatal(err)
	}
	other, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to read:", err)
	}
	for _, tc := range []struct {
		env, binary string
		want        bool
	}{
		{"", own, true},
		{"", other, false},
		{"", "", false},
		{"1", other, true},
		{"1", "", true},
		{"0", own, false},
	} {
		t.Setenv(envCPeers, tc.env)
		if got, err := wantCPeers(tc.binary); err != nil || got != tc.want {
			t.Errorf("%s=%q, binary %q: wantCPeers = %v, %v; want %v", envCPeers, tc.env, tc.binary, got, err, tc.want)
		}
	}
	t.Setenv(envCPeers, "yes")
	if _, err := wantCPeers(own); err == nil {
		t.Errorf("%s=yes accepted", envCPeers)
	}
	t.Setenv(envCPeers, "")
	if _, err := wantCPeers(t.TempDir()); err == nil {
		t.Error("a directory read as a binary: no error")
	}
}
