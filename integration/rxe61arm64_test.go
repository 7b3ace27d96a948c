//go:build integration

package integration

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// retransmitWatch recognises the failure 6.1's rxe makes on an arm64 TCG
// guest (README, "rxe 6.1 breaks on duplicated and retransmitted packets"):
// ACK timeouts fire there without any packet lost, the requester
// retransmits, and the responder now and then refuses a request it has
// already half seen, so the requester's WR completes with REM_INV_REQ_ERR.
// It happens with rdma-core's C programs on both ends (ib_send_bw) and in
// perftest pairs where the Go end is only an RDMA WRITE target (a C
// requester, rxe's own responder; seen once in a make itest-arm64 run on
// 2026-12-04). A watch is started before an exchange and asked after it
// fails.
type retransmitWatch struct {
	devs    []string
	retries uint64
}

// watchRetransmits snapshots the requester retry counters of both devices.
func watchRetransmits(t *testing.T) retransmitWatch {
	t.Helper()
	w := retransmitWatch{devs: devices(t, 2)}
	w.retries = w.retryTimeouts(t)
	return w
}

func (w retransmitWatch) retryTimeouts(t *testing.T) uint64 {
	t.Helper()
	var n uint64
	for _, dev := range w.devs {
		n += hwCounter(t, dev, "completer_retry_err")
	}
	return n
}

// refused reports whether a failed exchange's output out is that failure:
// an arm64 guest, a kernel before 6.2, a requester's REM_INV_REQ_ERR (the
// C tools print its status number, 9) and at least one ACK timeout since
// the watch began. The reason names the counts.
func (w retransmitWatch) refused(t *testing.T, out string) (string, bool) {
	t.Helper()
	if runtime.GOARCH != "arm64" || kernelAtLeast(t, 6, 2) {
		return "", false
	}
	if !strings.Contains(out, "REM_INV_REQ_ERR") && !strings.Contains(out, "Failed status 9:") {
		return "", false
	}
	d := w.retryTimeouts(t) - w.retries
	if d == 0 {
		return "", false
	}
	return fmt.Sprintf("rxe 6.1 on arm64 refused a retransmitted request (REM_INV_REQ_ERR after %d ACK timeouts with no packet lost; see the README)", d), true
}
