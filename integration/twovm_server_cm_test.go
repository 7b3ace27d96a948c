//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"
)

// The server's RDMA CM way in between two hosts: VM a runs rocev2-server
// (RDMA CM on its address at -p, -check), VM b connects with rocev2-send
// -cm and streams 3000 frames of 1..9000 bytes on four channels; the
// server sees them all byte-identical and both exit 0.
func TestTwoVMServerCM(t *testing.T) {
	role, peerAddr := twoVMRole(t)
	const port = "18730"
	if role == "a" {
		out := runPeer(t, 3*time.Minute, "rocev2-server", "-d", "rxe0", "-g", gidArg(t, "rxe0"), "-p", port, "-n", "3000", "-check", "-q")
		for _, want := range []string{"frames 3000,", "0 lost, 0 corrupt", "rdma cm: 1 senders connected"} {
			if !strings.Contains(out, want) {
				t.Errorf("rocev2-server (vm a) summary lacks %q:\n%s", want, out)
			}
		}
		t.Logf("server (vm a):\n%s", strings.TrimSpace(out))
		return
	}
	// A may still be booting or starting its server: retried.
	out := runClientUntilListening(t, 150*time.Second, twoVMGoNotYet, "rocev2-send",
		"-cm", "-d", "rxe0", "-g", gidArg(t, "rxe0"), "-p", port, "-n", "3000", "-s", "1-9000", "-c", "4", peerAddr)
	if !strings.Contains(out, "sent 3000 frames") {
		t.Errorf("rocev2-send (vm b):\n%s", out)
	}
	t.Logf("sender (vm b):\n%s", strings.TrimSpace(out))
}
