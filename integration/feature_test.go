//go:build integration

package integration

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The feature probes agree with the kernel: on 6.1 ATOMIC_WRITE, FLUSH and
// rereg_mr are missing, each probe says so with a *uverbs.FeatureError
// naming the kernel that adds it, and the verb itself fails the same way;
// from 6.5 on every probe is nil (TestAtomicWriteFlush and TestReregMR then
// use the features).
func TestFeatureProbes(t *testing.T) {
	a, b := opsPair(t, endOpts{})
	old := !kernelAtLeast(t, 6, 2)
	for _, c := range []struct {
		name  string
		err   error
		since string
		has   bool
	}{
		{"HaveAtomicWrite", qp.HaveAtomicWrite(a.ctx), "6.2", !old},
		{"HaveFlush(global)", qp.HaveFlush(a.ctx, qp.FlushGlobal), "6.2", !old},
		{"HaveReregMR", uverbs.HaveReregMR(a.ctx), "6.5", kernelAtLeast(t, 6, 5)},
	} {
		var fe *uverbs.FeatureError
		switch {
		case c.has && c.err != nil:
			t.Errorf("%s = %v, want nil on this kernel", c.name, c.err)
		case !c.has && (!errors.As(c.err, &fe) || !errors.Is(c.err, uverbs.ErrNotSupported) || fe.Since != c.since || fe.Device != a.dev):
			t.Errorf("%s = %v, want a FeatureError for %s since %s", c.name, c.err, a.dev, c.since)
		default:
			t.Logf("%s: %v", c.name, c.err)
		}
	}
	if err := qp.HaveFlush(a.ctx, qp.FlushType(4)); !errors.Is(err, qp.ErrInvalidWR) {
		t.Errorf("HaveFlush(type 4) = %v, want ErrInvalidWR", err)
	}
	// The verbs fail as the probes predicted.
	err := a.qp.PostSend([]qp.SendWR{{ID: 1, Opcode: qp.AtomicWrite, Flags: qp.Signaled, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), Swap: 7}})
	if probe := qp.HaveAtomicWrite(a.ctx); (probe == nil) != (err == nil) {
		t.Errorf("HaveAtomicWrite = %v but PostSend(AtomicWrite) = %v", probe, err)
	}
	if err == nil {
		wantWC(t, "atomic write", completion(t, a), 1, cq.Success, cq.OpAtomicWrite)
	}
	target := extraMR(t, b, 4096, uverbs.AccessLocalWrite)
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead
	rerr := target.Rereg(nil, &access)
	var fe *uverbs.FeatureError
	if probe := uverbs.HaveReregMR(b.ctx); (probe == nil) != (rerr == nil) || (rerr != nil && !errors.As(rerr, &fe)) {
		t.Errorf("HaveReregMR = %v but Rereg = %v", probe, rerr)
	}
}
