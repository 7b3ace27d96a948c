//go:build integration

package integration

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
)

// reuseRig is what each TestClosedHandleReuse case starts from: a context
// of its own (so the kernel's handles start afresh), a buffer and a PD.
type reuseRig struct {
	ctx *uverbs.Context
	buf *uverbs.Buffer
	pd  *uverbs.PD
}

// sameHandle fails the test unless the new object got the closed one's
// handle: otherwise the case proves nothing.
func sameHandle(t *testing.T, what string, now, old uint32) {
	t.Helper()
	if now != old {
		t.Fatalf("the new %s has handle %d, the closed one had %d: the test proves nothing", what, now, old)
	}
}

// The kernel hands a freed handle to the next object of its type (the
// lowest free id of the file's xarray): after Close, re-creating an object
// gives it the old one's handle. The closed object's methods must fail with
// ErrClosed, and the new object must be untouched by them. After each case
// has closed its own objects, its PD deallocates: no stale call registered
// anything in it (EBUSY otherwise).
func TestClosedHandleReuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, r reuseRig)
	}{
		{"PD", closedPD},
		{"MR", closedMR},
		{"CQ", closedCQ},
		{"rxe.QP", closedRxeQP},
		{"qp.QP", closedQP},
		{"SRQ", closedSRQ},
		{"AH", closedAH},
		{"MW", closedMW},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := reuseRig{ctx: uvOpen(t, devices(t, 1)[0])}
			var err error
			if r.buf, err = uverbs.NewBuffer(1<<16, uverbs.BufferOptions{}); err != nil {
				t.Fatal(err)
			}
			defer r.buf.Close()
			if r.pd, err = r.ctx.AllocPD(); err != nil {
				t.Fatal(err)
			}
			tc.run(t, r)
			if err := r.pd.Close(); err != nil {
				t.Errorf("closing the new PD: %v (a stale call registered something in it)", err)
			}
		})
	}
}

// closedPD: RegisterMR and AllocMW on the closed PD must not register in the
// new one.
func closedPD(t *testing.T, r reuseRig) {
	oldPD, err := r.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if err := oldPD.Close(); err != nil {
		t.Fatal(err)
	}
	pd, err := r.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	sameHandle(t, "PD", pd.Handle(), oldPD.Handle())
	if mr, err := oldPD.RegisterMR(r.buf, uverbs.AccessLocalWrite); !errors.Is(err, uverbs.ErrClosed) {
		if mr != nil {
			mr.Close()
		}
		t.Errorf("RegisterMR on a closed PD = %v, want ErrClosed", err)
	}
	if _, err := oldPD.AllocMW(uverbs.MWType2); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AllocMW on a closed PD = %v, want ErrClosed", err)
	}
	if err := pd.Close(); err != nil {
		t.Errorf("closing the PD that reused the handle: %v (a stale call registered something in it)", err)
	}
}

// closedMR: Rereg of the closed MR must not change the new one.
func closedMR(t *testing.T, r reuseRig) {
	oldMR, err := r.pd.RegisterMR(r.buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := oldMR.Close(); err != nil {
		t.Fatal(err)
	}
	mr, err := r.pd.RegisterMR(r.buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	sameHandle(t, "MR", mr.Handle(), oldMR.Handle())
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite
	if err := oldMR.Rereg(nil, &access); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Rereg of a closed MR = %v, want ErrClosed", err)
	}
}

// closedCQ: ReqNotify and Poll of the closed CQ must not arm or drain the
// new one.
func closedCQ(t *testing.T, r reuseRig) {
	oldCQ, err := rxe.CreateCQ(r.ctx, uverbs.CQSpec{CQE: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := oldCQ.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := rxe.CreateCQ(r.ctx, uverbs.CQSpec{CQE: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sameHandle(t, "CQ", c.Verbs().Handle(), oldCQ.Verbs().Handle())
	if err := oldCQ.Verbs().ReqNotify(false); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("ReqNotify of a closed CQ = %v, want ErrClosed", err)
	}
	if _, err := oldCQ.Poll(make([]rxe.WC, 1)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Poll of a closed CQ = %v, want ErrClosed", err)
	}
}

// closedRxeQP: Modify, Query and PostSend of the closed rxe QP must not move
// the new one out of RESET.
func closedRxeQP(t *testing.T, r reuseRig) {
	c, err := rxe.CreateCQ(r.ctx, uverbs.CQSpec{CQE: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	attr := uverbs.QPSpec{Type: uverbs.QPTypeRC, SendCQ: c.Verbs(), RecvCQ: c.Verbs(), Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
	oldQP, err := rxe.CreateQP(r.pd, attr)
	if err != nil {
		t.Fatal(err)
	}
	if err := oldQP.Close(); err != nil {
		t.Fatal(err)
	}
	q, err := rxe.CreateQP(r.pd, attr)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	sameHandle(t, "QP", q.Verbs().Handle(), oldQP.Verbs().Handle())
	init := &uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite}
	if err := oldQP.Verbs().Modify(init, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Modify of a closed QP = %v, want ErrClosed", err)
	}
	if _, _, err := oldQP.Verbs().Query(uverbs.QPAttrState); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Query of a closed QP = %v, want ErrClosed", err)
	}
	if err := oldQP.PostSend([]rxe.SendWR{{Opcode: rxe.OpSend}}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostSend on a closed QP = %v, want ErrClosed", err)
	}
	now, _, err := q.Verbs().Query(uverbs.QPAttrState)
	if err != nil {
		t.Fatal(err)
	}
	if now.State != uverbs.QPStateReset {
		t.Errorf("the new QP is in %v: a call on the closed one reached it", now.State)
	}
}

// closedQP: ToError of the closed qp.QP must not flush the new one.
func closedQP(t *testing.T, r reuseRig) {
	userCQ, err := cq.New(r.ctx, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer userCQ.Close()
	oldUserQP, err := qp.New(r.pd, qp.Spec{Type: qp.RC, SendCQ: userCQ, RecvCQ: userCQ})
	if err != nil {
		t.Fatal(err)
	}
	if err := oldUserQP.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	if err := oldUserQP.Close(); err != nil {
		t.Fatal(err)
	}
	userQP, err := qp.New(r.pd, qp.Spec{Type: qp.RC, SendCQ: userCQ, RecvCQ: userCQ})
	if err != nil {
		t.Fatal(err)
	}
	defer userQP.Close()
	sameHandle(t, "QP", userQP.Verbs().Handle(), oldUserQP.Verbs().Handle())
	if err := userQP.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	if err := oldUserQP.ToError(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("ToError of a closed QP = %v, want ErrClosed", err)
	}
	if a, err := userQP.Query(); err != nil || a.State != qp.StateInit {
		t.Errorf("the new QP is in %v (%v), want INIT: ToError of the closed one reached it", a.State, err)
	}
}

// closedSRQ: SetLimit, Resize, Query and PostRecv of the closed SRQ must not
// arm, resize or fill the new one.
func closedSRQ(t *testing.T, r reuseRig) {
	srqAttr := qp.SRQAttr{MaxWR: 8, MaxSGE: 1}
	oldSRQ, err := qp.NewSRQ(r.pd, srqAttr)
	if err != nil {
		t.Fatal(err)
	}
	if err := oldSRQ.Close(); err != nil {
		t.Fatal(err)
	}
	srq, err := qp.NewSRQ(r.pd, srqAttr)
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	sameHandle(t, "SRQ", srq.Verbs().Handle(), oldSRQ.Verbs().Handle())
	srqBefore, err := srq.Query()
	if err != nil {
		t.Fatal(err)
	}
	if err := oldSRQ.SetLimit(2); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("SetLimit of a closed SRQ = %v, want ErrClosed", err)
	}
	if err := oldSRQ.Resize(64); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Resize of a closed SRQ = %v, want ErrClosed", err)
	}
	if _, err := oldSRQ.Query(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Query of a closed SRQ = %v, want ErrClosed", err)
	}
	if err := oldSRQ.PostRecv([]qp.RecvWR{{ID: 1}}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostRecv on a closed SRQ = %v, want ErrClosed", err)
	}
	if now, err := srq.Query(); err != nil || now != srqBefore {
		t.Errorf("the new SRQ is %+v (%v), was %+v: a call on the closed one reached it", now, err, srqBefore)
	}
}

// closedAH: a UD send addressed with the closed AH must not be posted (its
// AH number names nothing, or another AH; rxe would fail the QP).
func closedAH(t *testing.T, r reuseRig) {
	sgid := roceV2GID(t, r.ctx)
	udCQ, err := cq.New(r.ctx, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer udCQ.Close()
	ud, err := qp.New(r.pd, qp.Spec{Type: qp.UD, SendCQ: udCQ, RecvCQ: udCQ})
	if err != nil {
		t.Fatal(err)
	}
	defer ud.Close()
	if err := ud.ActivateUD(qp.UDOptions{QKey: 0x11111111}); err != nil {
		t.Fatal(err)
	}
	ahParams := qp.AHSpec{DGID: sgid.GID, SGID: sgid}
	oldAH, err := qp.NewAH(r.pd, ahParams)
	if err != nil {
		t.Fatal(err)
	}
	if err := oldAH.Close(); err != nil {
		t.Fatal(err)
	}
	ah, err := qp.NewAH(r.pd, ahParams)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	sameHandle(t, "AH", ah.Verbs().Handle(), oldAH.Verbs().Handle())
	if err := ud.PostSend([]qp.SendWR{{ID: 1, Opcode: qp.Send, Flags: qp.Inline | qp.Signaled, Inline: []byte("x"), AH: oldAH, RemoteQPN: ud.Num(), RemoteQKey: 0x11111111}}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostSend with a closed AH = %v, want ErrClosed", err)
	}
	if st := ud.State(); st != qp.StateRTS {
		t.Errorf("the UD QP is in %v after a send with a closed AH", st)
	}
}

// closedMW: binding the closed window (a type 2 bind WR, or a type 1 bind
// through a QP in INIT) must not post a bind: its rkey may name the new
// window.
func closedMW(t *testing.T, r reuseRig) {
	userCQ, err := cq.New(r.ctx, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer userCQ.Close()
	userQP, err := qp.New(r.pd, qp.Spec{Type: qp.RC, SendCQ: userCQ, RecvCQ: userCQ})
	if err != nil {
		t.Fatal(err)
	}
	defer userQP.Close()
	if err := userQP.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	bindMR, err := r.pd.RegisterMR(r.buf, uverbs.AccessLocalWrite|uverbs.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	defer bindMR.Close()
	oldMW, err := r.pd.AllocMW(uverbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	if err := oldMW.Close(); err != nil {
		t.Fatal(err)
	}
	mw, err := r.pd.AllocMW(uverbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	sameHandle(t, "MW", mw.Handle(), oldMW.Handle())
	bind := qp.MWBindParams{MR: bindMR, Length: 64, Access: uverbs.AccessRemoteWrite}
	if _, err := qp.BindWR(1, qp.Signaled, oldMW, bind); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("BindWR of a closed MW = %v, want ErrClosed", err)
	}
	if _, err := userQP.BindMW(oldMW, 1, qp.Signaled, bind); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("BindMW of a closed MW = %v, want ErrClosed", err)
	}
}

// Context.Close wakes every goroutine blocked on the Context's fds — in
// cq.Channel.GetEvent, with and without a cancellable context, and in
// WaitAsyncEvent — with ErrClosed, promptly: within 2 s, far below any
// timeout of their own (a waiter Close forgot would sit until the 10 s
// limit below), and loose enough for a loaded TCG guest.
func TestContextCloseWakesWaiters(t *testing.T) {
	ctx := uvOpen(t, devices(t, 1)[0])
	ch, err := cq.NewChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, 16, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	cancelCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		who string
		err error
		at  time.Time
	}
	results := make(chan result, 4)
	var wg sync.WaitGroup
	for who, wait := range map[string]func() error{
		"GetEvent":             func() error { _, err := ch.GetEvent(context.Background()); return err },
		"GetEvent cancellable": func() error { _, err := ch.GetEvent(cancelCtx); return err },
		"WaitAsyncEvent":       func() error { _, err := ctx.WaitAsyncEvent(context.Background()); return err },
		"WaitAsyncEvent cancellable": func() error {
			_, err := ctx.WaitAsyncEvent(cancelCtx)
			return err
		},
	} {
		wg.Go(func() {
			err := wait()
			results <- result{who, err, time.Now()}
		})
	}
	time.Sleep(200 * time.Millisecond) // all four waiting
	start := time.Now()
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	defer func() { t.Logf("the slowest waiter returned %v after Context.Close began", slowest) }()
	for range 4 {
		select {
		case r := <-results:
			slowest = max(slowest, r.at.Sub(start))
			if !errors.Is(r.err, uverbs.ErrClosed) {
				t.Errorf("%s after Context.Close = %v, want ErrClosed", r.who, r.err)
			}
			if d := r.at.Sub(start); d > 2*time.Second {
				t.Errorf("%s returned %v after Context.Close began", r.who, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter is still blocked 10 s after Context.Close")
		}
	}
	wg.Wait()
	if _, err := ch.GetEvent(context.Background()); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("GetEvent on the channel of a closed Context = %v", err)
	}
	if _, err := ch.TryGetEvent(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("TryGetEvent on the channel of a closed Context = %v", err)
	}
	if err := c.ReqNotify(false); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("ReqNotify on a CQ of a closed Context = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("closing the CQ after its Context: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("closing the channel after its Context: %v", err)
	}
}

// Context.Close racing with goroutines that post sends and modify a
// connected QP: each call either completes or fails with ErrClosed (a
// doorbell refused after the WQEs were queued says ErrDoorbell and
// ErrClosed), nothing crashes, and nothing is left open.
func TestContextCloseWhilePosting(t *testing.T) {
	a, b := pair(t, true, endOpts{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			wr := []qp.SendWR{{ID: 1, Opcode: qp.Send, SGEs: []uverbs.SGE{sge(a, 0, 64)}}}
			wc := make([]cq.WC, 16)
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := a.qp.PostSend(wr)
				a.cq.Poll(wc)
				if err != nil && !errors.Is(err, uverbs.ErrClosed) && !errors.Is(err, qp.ErrQueueFull) {
					t.Errorf("PostSend racing Context.Close: %v", err)
					return
				}
				if errors.Is(err, uverbs.ErrClosed) {
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := a.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if err := a.qp.PostSend([]qp.SendWR{{ID: 2, Opcode: qp.Send, SGEs: []uverbs.SGE{sge(a, 0, 64)}}}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostSend after Context.Close = %v, want ErrClosed", err)
	}
	if _, err := a.qp.Query(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Query after Context.Close = %v, want ErrClosed", err)
	}
	_ = b
}

// The Context holds its children weakly, and a completion channel its CQs:
// CQs (one on a live channel) and a QP the program dropped are collected
// while their Context lives on (a server's Context lives as long as the
// server), their rings' cleanups unmap them, and the leak check reports the
// forgotten Closes. The channel's Close is not refused for the collected
// CQ, and the Context's Close copes with the kernel objects left behind.
func TestDroppedChildrenOfLiveContextAreCollected(t *testing.T) {
	ctx := uvOpen(t, devices(t, 1)[0])
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := cq.NewChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := uvCount(t)
	func() {
		c, err := cq.New(ctx, 16, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := qp.New(pd, qp.Spec{Type: qp.RC, SendCQ: c, RecvCQ: c}); err != nil {
			t.Fatal(err)
		}
		onChannel, err := cq.New(ctx, 16, ch)
		if err != nil {
			t.Fatal(err)
		}
		if err := onChannel.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		if got := uvCount(t); got.ringMaps <= before.ringMaps {
			t.Fatalf("no ring mappings with the CQ and QP alive: %+v", got)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for uvCount(t).ringMaps != before.ringMaps {
		if time.Now().After(deadline) {
			t.Fatalf("the rings of a dropped CQ and QP are still mapped under a live Context: %+v, before %+v", uvCount(t), before)
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	claimLeaks(t, "rxe ring mapping", "uverbs.CQ", "uverbs.QP")
	if err := ch.Close(); err != nil {
		t.Errorf("closing a channel whose only CQ was dropped and collected: %v", err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatalf("Context.Close with dropped children: %v", err)
	}
}

// roceV2GID is ctx's first RoCE v2 GID entry on port 1.
func roceV2GID(t *testing.T, ctx *uverbs.Context) uverbs.GIDEntry {
	t.Helper()
	tab, err := ctx.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tab {
		if e.Port == 1 && e.Type == uverbs.GIDTypeRoCEv2 {
			return e
		}
	}
	t.Fatalf("no RoCE v2 GID on port 1: %+v", tab)
	return uverbs.GIDEntry{}
}
