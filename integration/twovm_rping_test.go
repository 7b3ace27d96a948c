//go:build integration

package integration

import (
	"regexp"
	"testing"
	"time"
)

var (
	twoVMGoNotYet = regexp.MustCompile(`rejected: reason 8|ADDR_ERROR: connection timed out|UNREACHABLE`)
	twoVMCNotYet  = regexp.MustCompile(`RDMA_CM_EVENT_REJECTED, error 8|RDMA_CM_EVENT_ADDR_ERROR, error -110|RDMA_CM_EVENT_UNREACHABLE`)
)

// rping between two VMs, Go and C both ways: VM a serves (C rping, then
// tools/rping), VM b connects (tools/rping, then C rping), -S 4096 -C 100
// with the client validating every echo.
func TestTwoVMRping(t *testing.T) {
	role, peerAddr := twoVMRole(t)
	const size, count = "4096", 100
	for _, tc := range []struct {
		name, server, client, port string
	}{
		{"CServerGoClient", "/usr/bin/rping", "/usr/local/bin/rping", "7700"},
		{"GoServerCClient", "/usr/local/bin/rping", "/usr/bin/rping", "7701"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			common := []string{"-p", tc.port, "-S", size, "-C", "100", "-v"}
			if role == "a" {
				out := runPeer(t, 150*time.Second, tc.server, append([]string{"-s", "-a", "0.0.0.0"}, common...)...)
				checkPings(t, "server (vm a, "+tc.server+")", out, true, count)
				return
			}
			notYet := twoVMGoNotYet
			if tc.client == "/usr/bin/rping" {
				notYet = twoVMCNotYet
			}
			// A may still be booting (its address does not resolve yet:
			// ADDR_ERROR, ETIMEDOUT) or starting its server (a connect is
			// rejected at once, reason 8): both are retried.
			out := runClientUntilListening(t, 120*time.Second, notYet, tc.client, append([]string{"-c", "-a", peerAddr, "-V"}, common...)...)
			checkPings(t, "client (vm b, "+tc.client+")", out, false, count)
		})
	}
}
