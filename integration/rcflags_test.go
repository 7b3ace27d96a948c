//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// An MR without the remote right an operation needs refuses it: the
// requester's completion says REM_ACCESS_ERR and the responder's memory
// (or, for a READ, the requester's buffer) is untouched. The QPs grant
// everything, so the refusal is the MR's.
func TestMRAccessEnforced(t *testing.T) {
	lw := uverbs.AccessLocalWrite
	for _, c := range []struct {
		name   string
		access uverbs.Access
		op     qp.SendOpcode
	}{
		{"write without RemoteWrite", lw | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic, qp.RDMAWrite},
		{"read without RemoteRead", lw | uverbs.AccessRemoteWrite | uverbs.AccessRemoteAtomic, qp.RDMARead},
		{"FAA without RemoteAtomic", lw | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead, qp.AtomicFetchAndAdd},
		{"CAS without RemoteAtomic", lw | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead, qp.AtomicCmpAndSwp},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := opsPair(t, endOpts{})
			target := extraMR(t, b, 4096, c.access)
			remote := target.Buffer().Bytes()
			for i := range remote {
				remote[i] = 0x3c
			}
			local := a.buf.Bytes()[:64]
			for i := range local {
				local[i] = 0xc3
			}
			wr := qp.SendWR{ID: 1, Opcode: c.op, Flags: qp.Signaled, RemoteAddr: target.Addr(), RKey: target.RKey(),
				SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, 64)}, CompareAdd: 1, Swap: 2}
			if c.op == qp.AtomicFetchAndAdd || c.op == qp.AtomicCmpAndSwp {
				wr.SGEs[0].Length = 8
			}
			post(t, a, wr)
			w := completion(t, a)
			if w.WRID != 1 || w.Status != cq.RemAccessErr {
				t.Fatalf("completion %d %v, want REM_ACCESS_ERR", w.WRID, w.Status)
			}
			if !allBytes(remote, 0x3c) {
				t.Fatalf("responder memory changed: % x", remote[:64])
			}
			if !allBytes(local, 0xc3) {
				t.Fatalf("requester buffer changed: % x", local)
			}
			// The control: the same request into an MR that grants
			// everything succeeds on a fresh pair.
			a2, b2 := opsPair(t, endOpts{})
			open := extraMR(t, b2, 4096, lw|allRemote)
			wr.SGEs = []uverbs.SGE{mustSGE(t, a2.mr, 0, int(wr.SGEs[0].Length))}
			wr.RemoteAddr, wr.RKey = open.Addr(), open.RKey()
			post(t, a2, wr)
			if w := completion(t, a2); w.Status != cq.Success {
				t.Fatalf("control with full access: %v", w.Status)
			}
		})
	}
}

// Several SGEs on both sides: a SEND gathered from three pieces lands in
// three receive pieces of other sizes; an RDMA WRITE gathers into one
// remote range; an RDMA READ scatters one remote range into three pieces.
func TestRCScatterGather(t *testing.T) {
	a, b := opsPair(t, endOpts{cap: qp.Cap{MaxSendSGE: 4, MaxRecvSGE: 4}})
	src, dst := a.buf.Bytes(), b.buf.Bytes()
	for i := range src {
		src[i] = byte(i * 7)
	}
	for i := range dst {
		dst[i] = 0xee
	}
	gather := []struct{ off, n int }{{100, 7}, {2000, 13}, {50, 30}}
	var want []byte
	var sges []uverbs.SGE
	for _, g := range gather {
		want = append(want, src[g.off:g.off+g.n]...)
		sges = append(sges, mustSGE(t, a.mr, g.off, g.n))
	}
	scatter := []struct{ off, n int }{{300, 10}, {1000, 25}, {3000, 40}}
	var rsges []uverbs.SGE
	for _, s := range scatter {
		rsges = append(rsges, mustSGE(t, b.mr, s.off, s.n))
	}
	if err := b.qp.PostRecv([]qp.RecvWR{{ID: 5, SGEs: rsges}}); err != nil {
		t.Fatal(err)
	}
	post(t, a, qp.SendWR{ID: 1, Opcode: qp.Send, Flags: qp.Signaled, SGEs: sges})
	wantWC(t, "send", completion(t, a), 1, cq.Success, cq.OpSend)
	r := completion(t, b)
	wantWC(t, "receive", r, 5, cq.Success, cq.OpRecv)
	if r.ByteLen != 50 {
		t.Fatalf("byte_len %d, want 50", r.ByteLen)
	}
	got := append(append(append([]byte{}, dst[300:310]...), dst[1000:1025]...), dst[3000:3015]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("scattered bytes\n% x\nwant\n% x", got, want)
	}
	for _, edge := range []int{299, 310, 999, 1025, 2999, 3015, 3039} {
		if dst[edge] != 0xee {
			t.Fatalf("byte %d outside the message changed", edge)
		}
	}

	// WRITE gathers three pieces into b[512:562].
	post(t, a, qp.SendWR{ID: 2, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: sges, RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey()})
	wantWC(t, "write", completion(t, a), 2, cq.Success, cq.OpRDMAWrite)
	if !bytes.Equal(dst[512:562], want) || dst[511] != 0xee || dst[562] != 0xee {
		t.Fatalf("gathered write: % x", dst[511:563])
	}
	// READ scatters b[512:562] into a[3000:3010], a[3500:3520], a[3900:3920].
	for i := 3000; i < 4000; i++ {
		src[i] = 0
	}
	rd := []uverbs.SGE{mustSGE(t, a.mr, 3000, 10), mustSGE(t, a.mr, 3500, 20), mustSGE(t, a.mr, 3900, 20)}
	post(t, a, qp.SendWR{ID: 3, Opcode: qp.RDMARead, Flags: qp.Signaled, SGEs: rd, RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey()})
	w := completion(t, a)
	wantWC(t, "read", w, 3, cq.Success, cq.OpRDMARead)
	got = append(append(append([]byte{}, src[3000:3010]...), src[3500:3520]...), src[3900:3920]...)
	if !bytes.Equal(got, want) || w.ByteLen != 50 {
		t.Fatalf("scattered read (byte_len %d):\n% x\nwant\n% x", w.ByteLen, got, want)
	}
}

// A CQ armed solicited-only sleeps through a plain SEND (its completion is
// in the CQ, no event on the channel) and wakes for a SEND with the
// Solicited flag. The control arms for any completion and wakes on a plain
// SEND, so the quiet part cannot come from a dead channel.
func TestRCSolicitedEvents(t *testing.T) {
	a, b := opsPair(t, endOpts{channel: true})
	recv := make([]qp.RecvWR, 3)
	for i := range recv {
		recv[i] = qp.RecvWR{ID: uint64(10 + i), SGEs: []uverbs.SGE{mustSGE(t, b.mr, 64*i, 64)}}
	}
	if err := b.qp.PostRecv(recv); err != nil {
		t.Fatal(err)
	}
	send := func(id uint64, flags qp.SendFlags) {
		t.Helper()
		post(t, a, qp.SendWR{ID: id, Opcode: qp.Send, Flags: qp.Signaled | flags, SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, 16)}})
		wantWC(t, "send", completion(t, a), id, cq.Success, cq.OpSend)
	}
	wait := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		c, err := b.ch.GetEvent(ctx)
		if err == nil {
			if c != b.cq {
				t.Fatal("event for another CQ")
			}
			c.Ack(1)
		}
		return err
	}

	if err := b.cq.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	send(1, 0)
	wantWC(t, "plain receive", completion(t, b), 10, cq.Success, cq.OpRecv)
	if err := wait(300 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("solicited-only CQ woke on a plain SEND: %v", err)
	}
	send(2, qp.Solicited)
	if err := wait(10 * time.Second); err != nil {
		t.Fatalf("solicited SEND raised no event: %v", err)
	}
	w := completion(t, b)
	wantWC(t, "solicited receive", w, 11, cq.Success, cq.OpRecv)

	if err := b.cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	send(3, 0)
	if err := wait(10 * time.Second); err != nil {
		t.Fatalf("control: CQ armed for any completion did not wake on a plain SEND: %v", err)
	}
	wantWC(t, "control receive", completion(t, b), 12, cq.Success, cq.OpRecv)
}

// The Fence flag makes a request wait for the RDMA READ before it: READ
// b's fresh data into a's buffer L, then RDMA WRITE L back into another
// place of b. Fenced, the WRITE carries what the READ brought, every time;
// unfenced it is gathered at once and (how often depends on timing)
// carries L's stale contents: the control needs at least one stale trial,
// or the test could not tell a fence from none.
func TestRCFence(t *testing.T) {
	// The READ takes 120 packets at MTU 1024 (within rxe's 128 unacked
	// PSNs, so the WRITE is not held back for that reason); the WRITE sends
	// the last 64 bytes of L, the last the READ fills.
	const n, w = 120 * 1024, 64
	const trials = 16
	fresh := bytes.Repeat([]byte("fresh!"), n/6+1)[:n]
	run := func(fence bool) (stale int) {
		a, b := opsPair(t, endOpts{bufSize: 4 * n})
		var flags qp.SendFlags
		if fence {
			flags = qp.Fence
		}
		dst := b.buf.Bytes()
		for trial := range trials {
			copy(dst[:n], fresh)
			clear(dst[n : n+w])
			l := a.buf.Bytes()[:n]
			for i := range l {
				l[i] = 's'
			}
			err := a.qp.PostSend([]qp.SendWR{
				{ID: 1, Opcode: qp.RDMARead, Flags: qp.Signaled, SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
				{ID: 2, Opcode: qp.RDMAWrite, Flags: qp.Signaled | flags, SGEs: []uverbs.SGE{mustSGE(t, a.mr, n-w, w)}, RemoteAddr: b.mr.Addr() + n, RKey: b.mr.RKey()},
			})
			if err != nil {
				t.Fatal(err)
			}
			wc := pollWait(t, a.cq, make([]cq.WC, 2), 2, 10*time.Second)
			wantWC(t, "read", wc[0], 1, cq.Success, cq.OpRDMARead)
			wantWC(t, "write", wc[1], 2, cq.Success, cq.OpRDMAWrite)
			if !bytes.Equal(dst[n:n+w], fresh[n-w:]) {
				stale++
				if fence {
					t.Fatalf("fenced trial %d: the WRITE carried %q, not the READ's data", trial, dst[n:n+w])
				}
			}
		}
		return stale
	}
	run(true)
	stale := run(false)
	t.Logf("unfenced: %d of %d WRITEs carried stale data", stale, trials)
	if stale == 0 {
		t.Fatal("control: every unfenced WRITE also waited for the READ; this test cannot tell a fence from none")
	}
}
