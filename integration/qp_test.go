//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// SEND and SEND_WITH_IMM from 1 byte to 1 MiB (well past the 1024-byte path
// MTU, so multi-packet messages), scattered and gathered over several SGEs,
// between rxe0 and rxe1 and in loopback on rxe0: every byte arrives, the
// lengths and immediate data are reported.
func TestQPSendPayloads(t *testing.T) {
	const max = 1 << 20
	sizes := []int{1, 2, 63, 64, 1000, 1023, 1024, 1025, 2048, 4095, 4096, 4097, 9000, 65536, 100003, max}
	for _, loop := range []bool{false, true} {
		t.Run(map[bool]string{false: "rxe0-rxe1", true: "loopback"}[loop], func(t *testing.T) {
			a, b := pair(t, loop, endOpts{bufSize: 2 * max, cap: qp.Cap{MaxSendSGE: 3, MaxRecvSGE: 2}})
			src, dst := a.buf.Bytes(), b.buf.Bytes()
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range src[:max] {
				src[i] = byte(rng.Uint32())
			}
			wc := make([]cq.WC, 2)
			start := time.Now()
			total := 0
			for _, size := range sizes {
				for _, op := range []qp.SendOpcode{qp.Send, qp.SendWithImm} {
					clear(dst[:2*max])
					half, third := size/2, size/3
					// Receive into two pieces 1 MiB apart; send from three.
					if err := b.qp.PostRecv([]qp.RecvWR{{ID: uint64(size), SGEs: []uverbs.SGE{sge(b, 0, half), sge(b, max, size-half+16)}}}); err != nil {
						t.Fatal(err)
					}
					imm := uint32(size) ^ 0xc0ffee00
					err := a.qp.PostSend([]qp.SendWR{{ID: uint64(size) + 1, Opcode: op, Flags: qp.Signaled, Imm: imm,
						SGEs: []uverbs.SGE{sge(a, 0, third), sge(a, third, half-third), sge(a, half, size-half)}}})
					if err != nil {
						t.Fatal(err)
					}
					s := pollWait(t, a.cq, wc, 1, 30*time.Second)[0]
					if s.Status != cq.Success || s.WRID != uint64(size)+1 || s.Opcode != cq.OpSend || s.QPNum != a.qp.Num() {
						t.Fatalf("%d-byte %v: send completion %+v", size, op, s)
					}
					r := pollWait(t, b.cq, wc, 1, 30*time.Second)[0]
					if r.Status != cq.Success || r.WRID != uint64(size) || r.Opcode != cq.OpRecv || r.ByteLen != uint32(size) || r.QPNum != b.qp.Num() {
						t.Fatalf("%d-byte %v: receive completion %+v", size, op, r)
					}
					if withImm := r.Flags&cq.WithImm != 0; withImm != (op == qp.SendWithImm) || (withImm && r.Imm != imm) {
						t.Fatalf("%d-byte %v: flags %v imm %#x, want imm %#x", size, op, r.Flags, r.Imm, imm)
					}
					got := append(append([]byte{}, dst[:half]...), dst[max:max+size-half]...)
					if !bytes.Equal(got, src[:size]) {
						t.Fatalf("%d-byte %v: payload differs", size, op)
					}
					if dst[max+size-half] != 0 {
						t.Fatalf("%d-byte %v: wrote past the message", size, op)
					}
					total += size
				}
			}
			t.Logf("%d messages, %d bytes, in %v", 2*len(sizes), total, time.Since(start).Round(time.Millisecond))
		})
	}
}

// Inline sends up to the granted max_inline_data, from ordinary Go memory
// (no MR): a byte more is refused before anything reaches the ring.
func TestQPInline(t *testing.T) {
	a, b := pair(t, false, endOpts{cap: qp.Cap{MaxInlineData: 200}})
	maxInline := int(a.qp.Cap().MaxInlineData)
	if maxInline < 200 {
		t.Fatalf("granted max inline %d, asked for 200", maxInline)
	}
	t.Logf("granted max inline %d", maxInline)
	payload := make([]byte, maxInline+1)
	for i := range payload {
		payload[i] = byte(i*13 + 1)
	}
	if err := a.qp.PostSend([]qp.SendWR{{Opcode: qp.Send, Flags: qp.Inline, Inline: payload}}); !errors.Is(err, qp.ErrInlineTooLong) {
		t.Fatalf("%d inline bytes: err = %v, want ErrInlineTooLong", len(payload), err)
	}
	wc := make([]cq.WC, 2)
	for _, n := range []int{0, 1, 17, maxInline} {
		if err := b.qp.PostRecv([]qp.RecvWR{{ID: uint64(n), SGEs: []uverbs.SGE{sge(b, 0, 4096)}}}); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend([]qp.SendWR{{ID: uint64(n), Opcode: qp.Send, Flags: qp.Inline | qp.Signaled, Inline: payload[:n]}}); err != nil {
			t.Fatal(err)
		}
		if s := pollWait(t, a.cq, wc, 1, 10*time.Second)[0]; s.Status != cq.Success {
			t.Fatalf("inline %d: %+v", n, s)
		}
		r := pollWait(t, b.cq, wc, 1, 10*time.Second)[0]
		if r.Status != cq.Success || r.ByteLen != uint32(n) || !bytes.Equal(b.buf.Bytes()[:n], payload[:n]) {
			t.Fatalf("inline %d: %+v", n, r)
		}
	}
}

// RDMA WRITE, WRITE_WITH_IMM (which consumes a receive) and READ.
func TestQPRDMA(t *testing.T) {
	a, b := pair(t, false, endOpts{bufSize: 1 << 16})
	copy(a.buf.Bytes(), "0123456789abcdefghij")
	if err := b.qp.PostRecv([]qp.RecvWR{{ID: 77}}); err != nil {
		t.Fatal(err)
	}
	remote := b.mr.Addr()
	err := a.qp.PostSend([]qp.SendWR{
		{ID: 1, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 0, 10)}, RemoteAddr: remote + 100, RKey: b.mr.RKey()},
		{ID: 2, Opcode: qp.RDMAWriteWithImm, Flags: qp.Signaled, Imm: 0xabcdef01, SGEs: []uverbs.SGE{sge(a, 10, 10)}, RemoteAddr: remote + 110, RKey: b.mr.RKey()},
		{ID: 3, Opcode: qp.RDMARead, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 1000, 20)}, RemoteAddr: remote + 100, RKey: b.mr.RKey()},
	})
	if err != nil {
		t.Fatal(err)
	}
	wc := make([]cq.WC, 4)
	for i, w := range pollWait(t, a.cq, wc, 3, 10*time.Second) {
		want := []cq.Opcode{cq.OpRDMAWrite, cq.OpRDMAWrite, cq.OpRDMARead}[i]
		if w.Status != cq.Success || w.WRID != uint64(i+1) || w.Opcode != want {
			t.Fatalf("completion %d: %+v", i, w)
		}
	}
	if got := string(b.buf.Bytes()[100:120]); got != "0123456789abcdefghij" {
		t.Fatalf("written %q", got)
	}
	if got := string(a.buf.Bytes()[1000:1020]); got != "0123456789abcdefghij" {
		t.Fatalf("read back %q", got)
	}
	r := pollWait(t, b.cq, wc, 1, 10*time.Second)[0]
	if r.WRID != 77 || r.Status != cq.Success || r.Opcode != cq.OpRecvRDMAWithImm || r.Imm != 0xabcdef01 || r.Flags&cq.WithImm == 0 {
		t.Fatalf("write-with-imm receive %+v", r)
	}
}

// streamMessages sends n numbered SEND_WITH_IMM messages from a to b and
// checks that each arrives exactly once, in order, intact. Sends are posted
// in batches (one doorbell each) with one in every 16 signaled; the
// receiver keeps its ring topped up.
func streamMessages(t *testing.T, n int, limit time.Duration) {
	const (
		msgSize = 64
		recvs   = 1024
		batch   = 32
	)
	a, b := pair(t, false, endOpts{bufSize: recvs * msgSize, cqe: 2048, cap: qp.Cap{MaxSendWR: 512, MaxRecvWR: recvs}})
	src, dst := a.buf.Bytes(), b.buf.Bytes()
	post := make([]qp.RecvWR, recvs)
	for i := range post {
		post[i] = qp.RecvWR{ID: uint64(i), SGEs: []uverbs.SGE{sge(b, i*msgSize, msgSize)}}
	}
	if err := b.qp.PostRecv(post); err != nil {
		t.Fatal(err)
	}
	sends := make([]qp.SendWR, batch)
	swc, rwc := make([]cq.WC, 256), make([]cq.WC, 256)
	repost := make([]qp.RecvWR, 0, 256)
	sent, received, signaled, full := 0, 0, 0, 0
	// A source slot is written again only once the send that used it is
	// complete (a signaled completion for it or a later send was polled):
	// until then the buffer belongs to the device. (Rewriting slots before
	// PostSend knew there was room was safe on 6.1, which grants the 512
	// send WRs asked for; 6.12 grants the ring's 1023, so the slots of
	// sends still in flight were rewritten, and an RNR retry sent the new
	// bytes under the old sequence number.)
	slots, done := len(src)/msgSize, 0
	deadline := time.Now().Add(limit)
	start := time.Now()
	for received < n {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d sent, %d received of %d", limit, sent, received, n)
		}
		if k := min(batch, n-sent, done+slots-sent); k > 0 {
			for i := range sends[:k] {
				seq := sent + i
				slot := seq % (len(src) / msgSize)
				binary.LittleEndian.PutUint64(src[slot*msgSize:], uint64(seq))
				binary.LittleEndian.PutUint64(src[slot*msgSize+msgSize-8:], ^uint64(seq))
				sends[i] = qp.SendWR{ID: uint64(seq), Opcode: qp.SendWithImm, Imm: uint32(seq), SGEs: []uverbs.SGE{sge(a, slot*msgSize, msgSize)}}
				if seq%16 == 15 || seq == n-1 {
					sends[i].Flags = qp.Signaled
				}
			}
			switch err := a.qp.PostSend(sends[:k]); {
			case errors.Is(err, qp.ErrQueueFull):
				full++
			case err != nil:
				t.Fatal(err)
			default:
				sent += k
			}
		}
		k, err := a.cq.Poll(swc)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range swc[:k] {
			if w.Status != cq.Success {
				t.Fatalf("send %d: %v", w.WRID, w.Status)
			}
			signaled++
			done = int(w.WRID) + 1
		}
		k, err = b.cq.Poll(rwc)
		if err != nil {
			t.Fatal(err)
		}
		repost = repost[:0]
		for _, w := range rwc[:k] {
			m := dst[w.WRID*msgSize:]
			if w.Status != cq.Success || w.ByteLen != msgSize || w.Imm != uint32(received) ||
				binary.LittleEndian.Uint64(m) != uint64(received) || binary.LittleEndian.Uint64(m[msgSize-8:]) != ^uint64(received) {
				t.Fatalf("message %d: %+v, payload seq %d", received, w, binary.LittleEndian.Uint64(m))
			}
			received++
			repost = append(repost, qp.RecvWR{ID: w.WRID, SGEs: []uverbs.SGE{sge(b, int(w.WRID)*msgSize, msgSize)}})
		}
		if len(repost) > 0 {
			if err := b.qp.PostRecv(repost); err != nil {
				t.Fatal(err)
			}
		}
	}
	for signaled < (n+15)/16 {
		k, _ := a.cq.Poll(swc)
		signaled += k
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d signaled send completions", signaled, (n+15)/16)
		}
	}
	quiet(t, b.cq, "after the stream")
	el := time.Since(start)
	t.Logf("%d messages of %d bytes in %v: %.0f msg/s; send queue full %d times", n, msgSize, el.Round(time.Millisecond), float64(n)/el.Seconds(), full)
}

// 20 000 messages rxe0→rxe1: none lost, duplicated or reordered.
func TestQPStream(t *testing.T) { streamMessages(t, 20000, 3*time.Minute) }

// TestQPSoak streams a million messages; RXEVM_SOAK=1 (make soak) runs it.
func TestQPSoak(t *testing.T) {
	if os.Getenv("RXEVM_SOAK") != "1" {
		t.Skip("soak test: set RXEVM_SOAK=1 (make soak)")
	}
	streamMessages(t, 1_000_000, 50*time.Minute)
}

// The completion channel path: arm, a completion makes the channel fd
// readable, GetEvent names the CQ, Poll drains it, Ack, and Close accepts.
func TestQPCompletionChannel(t *testing.T) {
	devs := devices(t, 2)
	a := openEnd(t, devs[0], endOpts{})
	b := openEnd(t, devs[1], endOpts{channel: true})
	connectQPs(t, a, b)
	if err := b.cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ch.TryGetEvent(); !errors.Is(err, cq.ErrNoEvent) {
		t.Fatalf("event before any completion: %v", err)
	}
	if err := b.qp.PostRecv([]qp.RecvWR{{ID: 5, SGEs: []uverbs.SGE{sge(b, 0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend([]qp.SendWR{{ID: 6, Opcode: qp.Send, Flags: qp.Inline, Inline: []byte("ping")}}); err != nil {
		t.Fatal(err)
	}
	fds := []unix.PollFd{{Fd: int32(b.ch.FD()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 10000)
	if err != nil || n != 1 || fds[0].Revents&unix.POLLIN == 0 {
		t.Fatalf("channel fd not readable: n=%d revents=%#x err=%v", n, fds[0].Revents, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := b.ch.GetEvent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev != b.cq {
		t.Fatalf("event for %p, want the receive CQ %p", ev, b.cq)
	}
	wc := make([]cq.WC, 2)
	if r := pollWait(t, ev, wc, 1, time.Second)[0]; r.WRID != 5 || r.Status != cq.Success || r.ByteLen != 4 {
		t.Fatalf("%+v", r)
	}
	if err := b.cq.Close(); !errors.Is(err, cq.ErrUnackedEvents) {
		t.Fatalf("close with an unacked event: %v", err)
	}
	ev.Ack(1)
	// Not armed again: a second message raises no event.
	if err := b.qp.PostRecv([]qp.RecvWR{{ID: 7, SGEs: []uverbs.SGE{sge(b, 0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend([]qp.SendWR{{ID: 8, Opcode: qp.Send, Flags: qp.Inline, Inline: []byte("pong")}}); err != nil {
		t.Fatal(err)
	}
	pollWait(t, b.cq, wc, 1, 10*time.Second)
	if _, err := b.ch.TryGetEvent(); !errors.Is(err, cq.ErrNoEvent) {
		t.Fatalf("event without arming: %v", err)
	}
}

// A send naming a bad lkey completes with a protection error (signaled or
// not); the QP goes to ERROR and flushes what follows. Nothing crashes.
func TestQPBadLKey(t *testing.T) {
	a, b := pair(t, false, endOpts{})
	if err := b.qp.PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{sge(b, 0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	bad := sge(a, 0, 16)
	bad.LKey ^= 0x5a5a00
	if err := a.qp.PostSend([]qp.SendWR{
		{ID: 10, Opcode: qp.Send, SGEs: []uverbs.SGE{bad}},
		{ID: 11, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 0, 16)}},
	}); err != nil {
		t.Fatal(err)
	}
	wc := pollWait(t, a.cq, make([]cq.WC, 4), 2, 10*time.Second)
	t.Logf("completions: %v (vendor %#x), %v", wc[0].Status, wc[0].VendorErr, wc[1].Status)
	// 6.1's requester reports a gather that fails its key check as
	// LOC_QP_OP_ERR (finish_packet's error other than EFAULT). 6.12's
	// moves the QP to ERROR first and its completer then flushes the whole
	// send queue, the failing WQE included (measured: WR_FLUSH_ERR twice).
	failed := wc[0].Status == cq.LocQPOpErr || wc[0].Status == cq.LocProtErr
	if !failed && kernelAtLeast(t, 6, 2) {
		failed = wc[0].Status == cq.WRFlushErr
	}
	if wc[0].WRID != 10 || !failed {
		t.Fatalf("bad lkey: %+v, want LOC_QP_OP_ERR or LOC_PROT_ERR (or WR_FLUSH_ERR after 6.1)", wc[0])
	}
	if wc[1].WRID != 11 || wc[1].Status != cq.WRFlushErr {
		t.Fatalf("after the error: %+v, want WR_FLUSH_ERR", wc[1])
	}
	attr, err := a.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != qp.StateError || a.qp.State() != qp.StateError {
		t.Fatalf("state after the error %v", attr.State)
	}
	quiet(t, b.cq, "receiver of a failed send")
}

// Moving a QP to ERROR flushes every posted receive with WR_FLUSH_ERR.
func TestQPFlushReceives(t *testing.T) {
	a, _ := pair(t, false, endOpts{})
	const n = 10
	recvs := make([]qp.RecvWR, n)
	for i := range recvs {
		recvs[i] = qp.RecvWR{ID: uint64(100 + i), SGEs: []uverbs.SGE{sge(a, i*64, 64)}}
	}
	if err := a.qp.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	quiet(t, a.cq, "receives posted")
	if err := a.qp.ToError(); err != nil {
		t.Fatal(err)
	}
	wc := pollWait(t, a.cq, make([]cq.WC, n+1), n, 10*time.Second)
	for i, w := range wc {
		if w.WRID != uint64(100+i) || w.Status != cq.WRFlushErr {
			t.Fatalf("flush %d: %+v", i, w)
		}
	}
	quiet(t, a.cq, "after the flush")
	// Sends posted in ERROR are flushed too.
	if err := a.qp.PostSend([]qp.SendWR{{ID: 9, Opcode: qp.Send, Flags: qp.Inline, Inline: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if w := pollWait(t, a.cq, wc, 1, 10*time.Second)[0]; w.WRID != 9 || w.Status != cq.WRFlushErr {
		t.Fatalf("send in ERROR: %+v", w)
	}
}

// The send ring holds exactly the granted max_send_wr requests: with no
// receive posted at the peer (RNR, retried forever) nothing completes, so
// one more is refused with ErrQueueFull. One PostSend of many requests is
// enough for the kernel to run them all.
func TestQPSendQueueFull(t *testing.T) {
	a, b := pair(t, false, endOpts{cap: qp.Cap{MaxSendWR: 20}})
	capacity := int(a.qp.Cap().MaxSendWR)
	t.Logf("asked for 20 send WRs, granted %d", capacity)
	wrs := make([]qp.SendWR, capacity+1)
	for i := range wrs {
		wrs[i] = qp.SendWR{ID: uint64(i), Opcode: qp.Send, Flags: qp.Inline | qp.Signaled, Inline: []byte{byte(i)}}
	}
	if err := a.qp.PostSend(wrs); !errors.Is(err, qp.ErrQueueFull) {
		t.Fatalf("%d WRs into %d slots: err = %v", len(wrs), capacity, err)
	}
	if err := a.qp.PostSend(wrs[:capacity]); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(wrs[capacity:]); !errors.Is(err, qp.ErrQueueFull) || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("post into a full send queue: %v", err)
	}
	recvs := make([]qp.RecvWR, capacity)
	for i := range recvs {
		recvs[i] = qp.RecvWR{ID: uint64(i), SGEs: []uverbs.SGE{sge(b, i, 1)}}
	}
	if err := b.qp.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	wc := make([]cq.WC, capacity)
	pollWait(t, b.cq, wc, capacity, 30*time.Second)
	for i, w := range pollWait(t, a.cq, wc, capacity, 30*time.Second) {
		if w.WRID != uint64(i) || w.Status != cq.Success {
			t.Fatalf("send %d: %+v", i, w)
		}
	}
	for i := 0; i < capacity; i++ {
		if b.buf.Bytes()[i] != byte(i) {
			t.Fatalf("byte %d = %d", i, b.buf.Bytes()[i])
		}
	}
	if err := a.qp.PostSend(wrs[:1]); err != nil {
		t.Fatalf("post after the queue drained: %v", err)
	}
}

// Posting in the wrong state, or beyond the granted SGE count, is refused
// before the ring or the kernel sees it.
func TestQPPostErrors(t *testing.T) {
	devs := devices(t, 1)
	e := openEnd(t, devs[0], endOpts{cap: qp.Cap{MaxSendSGE: 2, MaxRecvSGE: 2}})
	send := []qp.SendWR{{Opcode: qp.Send, SGEs: []uverbs.SGE{sge(e, 0, 8)}}}
	if err := e.qp.PostRecv([]qp.RecvWR{{ID: 1}}); !errors.Is(err, qp.ErrBadState) {
		t.Fatalf("PostRecv in RESET: %v", err)
	}
	if err := e.qp.PostSend(send); !errors.Is(err, qp.ErrBadState) || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("PostSend in RESET: %v", err)
	}
	if err := e.qp.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.PostSend(send); !errors.Is(err, qp.ErrBadState) {
		t.Fatalf("PostSend in INIT: %v", err)
	}
	if err := e.qp.PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{sge(e, 0, 8)}}}); err != nil {
		t.Fatalf("PostRecv in INIT: %v", err)
	}
	c := e.qp.Cap()
	t.Logf("granted caps %+v", c)
	long := make([]uverbs.SGE, c.MaxRecvSGE+1)
	for i := range long {
		long[i] = sge(e, i*8, 8)
	}
	if err := e.qp.PostRecv([]qp.RecvWR{{SGEs: long}}); !errors.Is(err, qp.ErrTooManySGEs) {
		t.Fatalf("%d receive SGEs: %v", len(long), err)
	}
	// A modify the kernel refuses (INIT→RTS) is an error naming the verb,
	// and the cached state stays.
	err := e.qp.ToRTS(qp.RTSParams{})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "modify_qp") {
		t.Fatalf("INIT→RTS: %v", err)
	}
	if e.qp.State() != qp.StateInit {
		t.Fatalf("state %v after a refused modify", e.qp.State())
	}
}

// Every fd and ring mapping is released: after a full set-up and some
// traffic, after a QP creation the kernel refuses, and after one that fails
// halfway (rings mapped, then the mapping of the send ring fails).
func TestQPResourcesReleased(t *testing.T) {
	fds0, maps0 := openFDs(t), uverbsMappings(t)
	t.Run("full", func(t *testing.T) {
		a, b := pair(t, false, endOpts{channel: true})
		if got := uverbsMappings(t) - maps0; got != 6 {
			t.Errorf("%d ring mappings for two CQs and two QPs, want 6", got)
		}
		if err := b.qp.PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{sge(b, 0, 8)}}}); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend([]qp.SendWR{{ID: 1, Opcode: qp.Send, Flags: qp.Signaled | qp.Inline, Inline: []byte("bye")}}); err != nil {
			t.Fatal(err)
		}
		pollWait(t, b.cq, make([]cq.WC, 1), 1, 10*time.Second)
	})
	t.Run("refused", func(t *testing.T) {
		e := openEnd(t, devices(t, 1)[0], endOpts{})
		before := uverbsMappings(t)
		attr, err := e.ctx.QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		_, err = qp.New(e.pd, qp.Spec{Type: qp.RC, SendCQ: e.cq, RecvCQ: e.cq, Cap: qp.Cap{MaxSendWR: uint32(attr.MaxQPWR) + 1}})
		if !errors.Is(err, unix.EINVAL) {
			t.Fatalf("a QP beyond max_qp_wr: %v", err)
		}
		if got := uverbsMappings(t); got != before {
			t.Fatalf("%d mappings after a refused create, want %d", got, before)
		}
	})
	t.Run("halfway", func(t *testing.T) {
		// Run in a child: it caps its own address space so that the
		// small receive ring maps and the 4 MiB send ring does not.
		cmd := exec.Command(os.Args[0], "-test.run=^TestQPHalfwayChild$", "-test.v")
		cmd.Env = append(os.Environ(), "QP_HALFWAY_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "--- PASS: TestQPHalfwayChild") {
			t.Fatalf("child did not pass:\n%s", out)
		}
		t.Logf("child:\n%s", out)
	})
	if fds, maps := openFDs(t), uverbsMappings(t); fds != fds0 || maps != maps0 {
		t.Fatalf("after release: %d fds (was %d), %d ring mappings (was %d)", fds, fds0, maps, maps0)
	}
}

// TestQPHalfwayChild is TestQPResourcesReleased's child process.
func TestQPHalfwayChild(t *testing.T) {
	if os.Getenv("QP_HALFWAY_CHILD") != "1" {
		t.Skip("run by TestQPResourcesReleased")
	}
	e := openEnd(t, devices(t, 1)[0], endOpts{})
	fds0, maps0 := openFDs(t), uverbsMappings(t)
	vm := vmSize(t)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &old); err != nil {
		t.Fatal(err)
	}
	// 1 MiB of headroom: the receive ring (1 SGE, 128 WRs: 16 KiB) fits,
	// the send ring (256 inline bytes, 4096 WRs: 4 MiB) does not.
	capAS := unix.Rlimit{Cur: uint64(vm) + 1<<20, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_AS, &capAS); err != nil {
		t.Fatal(err)
	}
	_, err := qp.New(e.pd, qp.Spec{Type: qp.RC, SendCQ: e.cq, RecvCQ: e.cq, Cap: qp.Cap{MaxSendWR: 4096, MaxRecvWR: 128, MaxInlineData: 256}})
	if rerr := unix.Setrlimit(unix.RLIMIT_AS, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, unix.ENOMEM) || !strings.Contains(err.Error(), "send queue") {
		t.Fatalf("create with the send ring unmappable: %v", err)
	}
	t.Logf("create failed as arranged: %v", err)
	if fds, maps := openFDs(t), uverbsMappings(t); fds != fds0 || maps != maps0 {
		t.Fatalf("after the failed create: %d fds (was %d), %d ring mappings (was %d)", fds, fds0, maps, maps0)
	}
	// The kernel QP was destroyed too: the PD can go, which it refuses
	// (EBUSY) while a QP uses it. openEnd's cleanup closes it (again).
	if err := e.qp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.mr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.pd.Close(); err != nil {
		t.Fatalf("PD still in use after the failed create: %v", err)
	}
}

// vmSize is the process's virtual size in bytes.
func vmSize(t testing.TB) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmSize:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmSize")
	return 0
}

// On the real device the post and poll paths allocate nothing either,
// doorbell write included.
func TestQPZeroAllocs(t *testing.T) {
	a, b := pair(t, false, endOpts{})
	send := []qp.SendWR{{ID: 1, Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: 3, SGEs: []uverbs.SGE{sge(a, 0, 256)}}}
	recv := []qp.RecvWR{{ID: 2, SGEs: []uverbs.SGE{sge(b, 0, 256)}}}
	wc := make([]cq.WC, 1)
	deadline := time.Now().Add(time.Minute)
	wait := func(c *cq.CQ) {
		for {
			n, err := c.Poll(wc)
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("poll: %d %v", n, err)
			}
			if n == 1 {
				if wc[0].Status != cq.Success {
					t.Fatalf("%+v", wc[0])
				}
				return
			}
		}
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := b.qp.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend(send); err != nil {
			t.Fatal(err)
		}
		wait(a.cq)
		wait(b.cq)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per PostRecv+PostSend+Poll round trip, want 0", allocs)
	}
}
