//go:build integration

package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// lossWatch recognises a packet lost on a transport that never
// retransmits (UC, UD): rxe counted it sent on one device and the other
// never counted it received, and a ping-pong waiting for it stalls, C
// against C too. Seen once, ib_write_lat -c UC on arm64 under a loaded
// host. Any other stall, with every packet accounted for, is the
// program's and fails the test. A watch is started before an exchange
// and asked after it fails.
type lossWatch struct {
	devs       []string
	sent, rcvd uint64
}

// unreliable says whether perftest args run over UC or UD.
func unreliable(args []string) bool {
	i := slices.Index(args, "-c")
	return i >= 0 && i+1 < len(args) && (args[i+1] == "UC" || args[i+1] == "UD")
}

// watchLoss snapshots both devices' packet counters.
func watchLoss(t *testing.T) lossWatch {
	t.Helper()
	w := lossWatch{devs: devices(t, 2)}
	w.sent, w.rcvd = w.counts(t)
	return w
}

func (w lossWatch) counts(t *testing.T) (sent, rcvd uint64) {
	t.Helper()
	for _, dev := range w.devs {
		sent += hwCounter(t, dev, "sent_pkts")
		rcvd += hwCounter(t, dev, "rcvd_pkts")
	}
	return sent, rcvd
}

// lost reports whether a failed exchange's output out is a stall ("no
// completion", the Go perftest's stall error) with fewer packets received
// than sent since the watch began; the reason names the counts. Without
// such a stall, or with none missing, it reports the counts and false.
func (w lossWatch) lost(t *testing.T, out string) (string, bool) {
	t.Helper()
	sent, rcvd := w.counts(t)
	sent, rcvd = sent-w.sent, rcvd-w.rcvd
	why := fmt.Sprintf("rxe sent %d packets and received %d", sent, rcvd)
	return why, strings.Contains(out, errStallText) && rcvd < sent
}

// errStallText is the Go perftest's stall error (tools/perftest's errStall).
const errStallText = "no completion"
