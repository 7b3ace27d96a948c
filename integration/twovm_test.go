//go:build integration

package integration

import (
	"os"
	"strings"
	"testing"
	"time"
)

// twoVMRole returns "a" or "b" in a two-VM run (RXEVM_TOPOLOGY=twovm), and
// skips otherwise.
func twoVMRole(t *testing.T) (role, peerAddr string) {
	t.Helper()
	if !strings.HasPrefix(os.Getenv("RXEVM_TOPOLOGY"), "twovm") {
		t.Skip("needs two VMs: RXEVM_TOPOLOGY=twovm (make itest-twovm)")
	}
	return os.Getenv("RXEVM_ROLE"), os.Getenv("RXEVM_PEER")
}

// The C tools between two real hosts: rxe0 on each VM's virtio NIC.
func TestTwoVMCToolsRCPingpong(t *testing.T) {
	role, peerAddr := twoVMRole(t)
	const size, iters = 4096, 100
	args := []string{"-d", "rxe0", "-g", gidArg(t, "rxe0"), "-s", "4096", "-n", "100", "-p", "18700"}
	if role == "a" {
		checkPingpong(t, "server (vm a)", runPeer(t, 90*time.Second, "ibv_rc_pingpong", args...), size, iters)
		return
	}
	// A may still be booting: retry the client until its server listens.
	deadline := time.Now().Add(60 * time.Second)
	for {
		p := startPeer(t, 60*time.Second, "ibv_rc_pingpong", append(args, peerAddr)...)
		<-p.done
		out := p.out.String()
		if p.err == nil {
			checkPingpong(t, "client (vm b)", out, size, iters)
			return
		}
		if !strings.Contains(out, "Couldn't connect") || time.Now().After(deadline) {
			t.Fatalf("client: %v\n%s", p.err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
