//go:build integration

package integration

import (
	"testing"

	"github.com/pureverbs/pureverbs/qp"
)

// qp.New against the kernel: a zero Cap asks for the documented defaults
// (128 WRs, 1 SGE each way), which the kernel's own QUERY_QP then reports,
// while a small Cap gets a small queue (so the large one is the defaults'
// doing, not the device's); the QP starts in RESET, and State follows every
// transition Modify makes, as QUERY_QP sees it, and stays put when the
// kernel refuses one.
func TestQPNewDefaults(t *testing.T) {
	devs := devices(t, 1)
	a := openEnd(t, devs[0], endOpts{})
	b := openEnd(t, devs[0], endOpts{cap: qp.Cap{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 3}})

	query := func(e *qpEnd) qp.Attr {
		t.Helper()
		attr, err := e.qp.Query()
		if err != nil {
			t.Fatal(err)
		}
		return attr
	}
	ac, bc := a.qp.Cap(), b.qp.Cap()
	aq, bq := query(a).Cap, query(b).Cap
	t.Logf("zero Cap: granted %+v, QUERY_QP %+v; small Cap: granted %+v, QUERY_QP %+v", ac, aq, bc, bq)
	for _, c := range []qp.Cap{ac, {MaxSendWR: aq.MaxSendWR, MaxRecvWR: aq.MaxRecvWR, MaxSendSGE: aq.MaxSendSGE, MaxRecvSGE: aq.MaxRecvSGE}} {
		if c.MaxSendWR < 128 || c.MaxRecvWR < 128 || c.MaxSendSGE < 1 || c.MaxRecvSGE < 1 {
			t.Errorf("zero Cap got %+v, want at least 128 WRs and 1 SGE each way", c)
		}
	}
	if bc.MaxSendWR < 8 || bc.MaxRecvWR < 4 || bc.MaxSendSGE < 2 || bc.MaxRecvSGE < 3 || bc.MaxRecvWR >= 128 || bq.MaxRecvWR >= 128 {
		t.Errorf("Cap{8, 4, 2, 3} got %+v (QUERY_QP %+v), want at least that and fewer than 128 receive WRs", bc, bq)
	}
	if a.qp.Type() != qp.RC || a.qp.Num() == 0 || a.qp.Num() == b.qp.Num() {
		t.Errorf("type %v, QPNs %d and %d", a.qp.Type(), a.qp.Num(), b.qp.Num())
	}

	state := func(want qp.State) {
		t.Helper()
		if got := a.qp.State(); got != want {
			t.Errorf("State() = %v, want %v", got, want)
		}
		if got := query(a).State; got != want {
			t.Errorf("QUERY_QP state %v, want %v", got, want)
		}
	}
	state(qp.StateReset)
	if err := a.qp.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	state(qp.StateInit)
	if err := a.qp.ToRTR(qp.RTRParams{DestQPN: b.qp.Num(), RQPSN: psn(b.qp), PathMTU: a.port.ActiveMTU,
		DGID: b.gid, SGID: a.sgid}); err != nil {
		t.Fatal(err)
	}
	state(qp.StateRTR)
	if err := a.qp.ToRTS(qp.RTSParams{SQPSN: psn(a.qp)}); err != nil {
		t.Fatal(err)
	}
	state(qp.StateRTS)
	if err := a.qp.ToInit(qp.InitParams{}); err == nil { // RTS→INIT is no transition
		t.Error("RTS→INIT accepted")
	}
	state(qp.StateRTS)
	if err := a.qp.ToError(); err != nil {
		t.Fatal(err)
	}
	state(qp.StateError)
}
