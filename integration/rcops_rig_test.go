//go:build integration

package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// allRemote is the QP access the opcode tests grant: whether an operation
// is allowed is then up to the memory region (or window) it names.
const allRemote = uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

// opsPair connects an RC pair (rxe0 → rxe1) whose QPs grant every remote
// access, with the given ends' options; a is the requester, b the responder.
func opsPair(t testing.TB, o endOpts) (a, b *qpEnd) {
	t.Helper()
	return opsPairAccess(t, o, allRemote)
}

// opsPairAccess is opsPair with the QPs granting access.
func opsPairAccess(t testing.TB, o endOpts, access uverbs.Access) (a, b *qpEnd) {
	t.Helper()
	devs := devices(t, 2)
	a, b = openEnd(t, devs[0], o), openEnd(t, devs[1], o)
	for _, s := range []struct{ local, remote *qpEnd }{{a, b}, {b, a}} {
		q := s.local.qp
		if err := q.ToInit(qp.InitParams{Access: access}); err != nil {
			t.Fatal(err)
		}
		if err := q.ToRTR(qp.RTRParams{
			DestQPN: s.remote.qp.Num(), RQPSN: psn(s.remote.qp), PathMTU: s.local.port.ActiveMTU,
			DGID: s.remote.gid, SGID: s.local.sgid, MaxDestRdAtomic: 4,
		}); err != nil {
			t.Fatal(err)
		}
		// Few retries: a refused request fails fast. Timeout 14 (67 ms): with
		// 10 (4 ms) the 120-packet READ of TestRCFence ran out of retries on
		// 6.12 under TCG (RETRY_EXC_ERR, twice in a row).
		if err := q.ToRTS(qp.RTSParams{SQPSN: psn(q), MaxRdAtomic: 4, Timeout: 14, RetryCnt: 2}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// extraMR registers size bytes of new off-heap memory on e's PD with access.
func extraMR(t testing.TB, e *qpEnd, size int, access uverbs.Access) *uverbs.MR {
	t.Helper()
	buf, err := uverbs.NewBuffer(size, uverbs.BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "buffer", buf.Close()) })
	mr, err := e.pd.RegisterMR(buf, access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "MR", mr.Close()) })
	return mr
}

// mustSGE is mr.SGE that fails the test on error.
func mustSGE(t testing.TB, mr *uverbs.MR, off, length int) uverbs.SGE {
	t.Helper()
	s, err := mr.SGE(off, length)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// post posts one send request on e's QP and fails the test on error.
func post(t testing.TB, e *qpEnd, wr qp.SendWR) {
	t.Helper()
	if err := e.qp.PostSend([]qp.SendWR{wr}); err != nil {
		t.Fatalf("post %v: %v", wr.Opcode, err)
	}
}

// completion waits for one completion on e's CQ.
func completion(t testing.TB, e *qpEnd) cq.WC {
	t.Helper()
	return pollWait(t, e.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
}

// wantWC checks a completion's id, status and opcode.
func wantWC(t testing.TB, what string, w cq.WC, id uint64, st cq.Status, op cq.Opcode) {
	t.Helper()
	if w.WRID != id || w.Status != st || (st == cq.Success && w.Opcode != op) {
		t.Fatalf("%s: completion id %d %v %v, want id %d %v %v", what, w.WRID, w.Status, w.Opcode, id, st, op)
	}
}

// isNotSupported is errors.Is(err, uverbs.ErrNotSupported).
func isNotSupported(err error) bool { return errors.Is(err, uverbs.ErrNotSupported) }

// allBytes reports whether every byte of b is v.
func allBytes(b []byte, v byte) bool {
	for _, c := range b {
		if c != v {
			return false
		}
	}
	return true
}
