//go:build integration

package integration

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// retransmitWatch recognises the failure 6.1's rxe makes when its
// requester retransmits (README, "rxe 6.1 breaks on duplicated and
// retransmitted packets"): the responder now and then refuses a request it
// has already half seen, and the requester's WR completes with
// REM_INV_REQ_ERR, or with REM_OP_ERR when it fails to place a SEND in
// the posted receive (rxe_resp.c's malformed-WQE path, which 6.1 takes for
// a copy_data error other than ENOSPC). Under TCG
// the ACK timeouts fire without any packet lost: on arm64 always, on amd64
// when the host is loaded (TestServerStream, load 12: REM_OP_ERR after
// 48 907 frames, REM_INV_REQ_ERR after 42 050 in another run). It happens
// with rdma-core's C programs on both ends (ib_send_bw: LOC_QP_OP_ERR/
// REM_OP_ERR, WR_FLUSH_ERR/REM_INV_REQ_ERR) and in perftest pairs where the
// Go end is only an RDMA WRITE target (a C requester, rxe's own responder).
// A watch is started before an exchange and asked after it fails.
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
// a kernel before 6.2, a requester's REM_INV_REQ_ERR or REM_OP_ERR (the C
// tools print their status numbers, 9 and 11) and at least one ACK timeout
// since the watch began. Without a retransmission neither status is the
// kernel's: a receive too small or a bad lkey must fail the test. The
// reason names the counts.
func (w retransmitWatch) refused(t *testing.T, out string) (string, bool) {
	t.Helper()
	if kernelAtLeast(t, 6, 2) {
		return "", false
	}
	status := ""
	for _, s := range []struct{ name, c string }{{"REM_INV_REQ_ERR", "Failed status 9:"}, {"REM_OP_ERR", "Failed status 11:"}} {
		if strings.Contains(out, s.name) || strings.Contains(out, s.c) {
			status = s.name
		}
	}
	if status == "" {
		return "", false
	}
	d := w.retryTimeouts(t) - w.retries
	if d == 0 {
		return "", false
	}
	return fmt.Sprintf("rxe 6.1 refused a retransmitted request (%s after %d ACK timeouts, %s; see the README)", status, d, runtime.GOARCH), true
}
