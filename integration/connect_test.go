//go:build integration

package integration

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Two RC QPs on rxe0 and rxe1 connected with one Connect call each, from
// peer records that went through the pingpong text format and GIDs found
// by address, exchange a SEND_WITH_IMM; the receive was posted in INIT,
// before Connect.
func TestQPConnect(t *testing.T) {
	names := devices(t, 2)
	a, b := openEnd(t, names[0], endOpts{}), openEnd(t, names[1], endOpts{})
	for _, e := range []*qpEnd{a, b} {
		found, err := e.ctx.FindGID(1, netip.AddrFrom4([4]byte(e.gid.To4())))
		if err != nil || found.GID != e.gid || found.Index != e.gidIndex {
			t.Fatalf("%s: FindGID(%v) = %+v, %v; sysfs has it at index %d", e.dev, e.gid, found, err, e.gidIndex)
		}
	}
	if err := b.qp.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	rsge, err := b.mr.SGE(0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.qp.PostRecv([]qp.RecvWR{{ID: 9, SGEs: []uverbs.SGE{rsge}}}); err != nil {
		t.Fatal(err)
	}
	record := func(e *qpEnd, psn uint32) qp.Peer {
		text, err := qp.Peer{QPN: e.qp.Num(), PSN: psn, GID: e.gid}.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var p qp.Peer
		if err := p.UnmarshalText(text); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const psnA, psnB = 0x123456, 0xabcdef
	if err := a.qp.Connect(record(b, psnB), qp.ConnectOptions{SGID: a.sgid, PathMTU: a.port.ActiveMTU, SendPSN: psnA}); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(record(a, psnA), qp.ConnectOptions{SGID: b.sgid, PathMTU: b.port.ActiveMTU, SendPSN: psnB}); err != nil {
		t.Fatal(err)
	}
	if a.qp.State() != qp.StateRTS || b.qp.State() != qp.StateRTS {
		t.Fatalf("states after Connect: %v, %v", a.qp.State(), b.qp.State())
	}
	attr, err := a.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	if attr.MinRNRTimer != 12 || attr.RetryCnt != 6 || attr.RNRRetry != 7 || attr.SQPSN != psnA || attr.DestQPNum != b.qp.Num() {
		t.Fatalf("queried after Connect: min RNR %d, retry %d, RNR retry %d, SQ PSN %#x, dest %d",
			attr.MinRNRTimer, attr.RetryCnt, attr.RNRRetry, attr.SQPSN, attr.DestQPNum)
	}
	msg := "connected in one call"
	copy(a.buf.Bytes(), msg)
	ssge, err := a.mr.SGE(0, len(msg))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend([]qp.SendWR{{ID: 1, Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: 77, SGEs: []uverbs.SGE{ssge}}}); err != nil {
		t.Fatal(err)
	}
	w := pollWait(t, b.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
	if w.Status != cq.Success || w.WRID != 9 || w.Imm != 77 || string(b.buf.Bytes()[:w.ByteLen]) != msg {
		t.Fatalf("receive: %+v, %q", w, b.buf.Bytes()[:w.ByteLen])
	}
	if s := pollWait(t, a.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]; s.Status != cq.Success {
		t.Fatalf("send completion: %+v", s)
	}
}
