package uverbs

import (
	"context"
	"errors"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
	"runtime"
	"sync"
	"testing"
	"time"
)

// fakeObjects is one of every object on a fake command fd, whose all-zero
// answers give every object handle 0, as the kernel hands a freed handle
// to the next object of its type (makeFakeObjects creates them).
type fakeObjects struct {
	pd  *PD
	buf *Buffer
	mr  *MR
	mw  *MW
	ah  *AH
	cq  *CQ
	qp  *QP
	srq *SRQ
	ch  *CompChannel
}

func makeFakeObjects(t *testing.T, c *Context) fakeObjects {
	t.Helper()
	var o fakeObjects
	var err error
	if o.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if o.buf, err = NewBuffer(4096, BufferOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.buf.Close() })
	if o.mr, err = o.pd.RegisterMR(o.buf, AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if o.mw, err = o.pd.AllocMW(MWType1); err != nil {
		t.Fatal(err)
	}
	if o.ah, err = o.pd.CreateAH(GlobalAH(GID{15: 1}, 1, 64), nil); err != nil {
		t.Fatal(err)
	}
	if o.cq, err = c.CreateCQ(CQSpec{CQE: 16}, nil); err != nil {
		t.Fatal(err)
	}
	if o.qp, err = o.pd.CreateQP(QPSpec{Type: QPTypeRC, SendCQ: o.cq, RecvCQ: o.cq}, nil); err != nil {
		t.Fatal(err)
	}
	if o.srq, err = o.pd.CreateSRQ(SRQSpec{Attr: SRQAttr{MaxWR: 4, MaxSGE: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	return o
}

// closedCalls are every method of the objects that sends a command, each
// returning its error.
func closedCalls(o fakeObjects, c *Context) map[string]func() error {
	access := AccessLocalWrite
	return map[string]func() error{
		"PD.RegisterMR": func() error { _, err := o.pd.RegisterMR(o.buf, AccessLocalWrite); return err },
		"PD.AllocMW":    func() error { _, err := o.pd.AllocMW(MWType1); return err },
		"PD.CreateAH":   func() error { _, err := o.pd.CreateAH(GlobalAH(GID{15: 1}, 1, 64), nil); return err },
		"PD.CreateQP": func() error {
			_, err := o.pd.CreateQP(QPSpec{Type: QPTypeRC, SendCQ: o.cq, RecvCQ: o.cq}, nil)
			return err
		},
		"PD.CreateSRQ": func() error {
			_, err := o.pd.CreateSRQ(SRQSpec{Attr: SRQAttr{MaxWR: 4, MaxSGE: 1}}, nil)
			return err
		},
		"MR.Rereg":            func() error { return o.mr.Rereg(nil, &access) },
		"CQ.ReqNotify":        func() error { return o.cq.ReqNotify(false) },
		"CQ.Resize":           func() error { _, err := o.cq.Resize(32, nil); return err },
		"QP.Modify":           func() error { return o.qp.Modify(&QPAttr{State: QPStateInit}, QPAttrState) },
		"QP.Query":            func() error { _, _, err := o.qp.Query(QPAttrState); return err },
		"QP.PostSendDoorbell": func() error { return o.qp.PostSendDoorbell() },
		"QP.AttachMcast":      func() error { return o.qp.AttachMcast(GID{0: 0xff}, 0) },
		"SRQ.Modify":          func() error { return o.srq.Modify(SRQAttr{Limit: 1}, SRQLimit, nil) },
		"SRQ.Query":           func() error { _, err := o.srq.Query(); return err },
	}
}

// After an object's Close, every method of it fails with ErrClosed and
// nothing reaches the command fd: its handle may by now name another
// object.
func TestClosedObjectsSendNothing(t *testing.T) {
	c, read := fakeContext(t)
	o := makeFakeObjects(t, c)
	if o.ah.Closed() || o.mw.Closed() {
		t.Fatalf("open AH or MW reports Closed: %v, %v", o.ah.Closed(), o.mw.Closed())
	}
	for _, closer := range []interface{ Close() error }{o.mw, o.ah, o.qp, o.srq, o.mr, o.cq, o.pd} {
		if err := closer.Close(); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if !o.ah.Closed() || !o.mw.Closed() {
		t.Errorf("closed AH or MW does not report Closed (providers refuse posting with them by it): %v, %v", o.ah.Closed(), o.mw.Closed())
	}
	for name, call := range closedCalls(o, c) {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
		if b := read(); len(b) != 0 {
			t.Errorf("%s after Close wrote %d bytes: %x", name, len(b), b)
		}
	}
}

// After the Context's Close, every method of the Context and of every
// object under it fails with ErrClosed and nothing reaches the fd.
func TestContextClosedSendsNothing(t *testing.T) {
	c, read := fakeContext(t)
	// The sysfs reads (P_Keys, and GIDs without the ioctl methods) answer
	// from a table that would be read fine.
	c.sysfs = gidTree(t)
	(&fakeSysfs{t: t, root: c.sysfs}).write("class/infiniband/fake0/ports/1/pkeys/0", "0xffff\n")
	o := makeFakeObjects(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	read()
	calls := closedCalls(o, c)
	calls["Context.QueryPKey"] = func() error { _, err := c.QueryPKey(1, 0); return err }
	calls["Context.PKeyIndex"] = func() error { _, err := c.PKeyIndex(1, 0xffff); return err }
	calls["Context.QueryGID"] = func() error { _, err := c.QueryGID(1, 1); return err }
	calls["Context.QueryGIDTable"] = func() error { _, err := c.QueryGIDTable(); return err }
	calls["Context.AllocPD"] = func() error { _, err := c.AllocPD(); return err }
	calls["Context.CreateCQ"] = func() error { _, err := c.CreateCQ(CQSpec{CQE: 1}, nil); return err }
	calls["Context.CreateCompChannel"] = func() error { _, err := c.CreateCompChannel(); return err }
	calls["Context.QueryPort"] = func() error { _, err := c.QueryPort(1); return err }
	calls["Context.QueryDevice"] = func() error { _, err := c.QueryDevice(); return err }
	calls["Context.Mmap"] = func() error { _, err := c.Mmap(0, 4096); return err }
	calls["Context.ReadAsyncEvent"] = func() error { _, err := c.ReadAsyncEvent(); return err }
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Context.Close = %v, want ErrClosed", name, err)
		}
		if b := read(); len(b) != 0 {
			t.Errorf("%s after Context.Close wrote %d bytes: %x", name, len(b), b)
		}
	}
}

// A method racing with Close either runs before the destroy, with the
// handle still the object's, or fails with ErrClosed: no command with the
// handle follows the destroy on the fd.
func TestCloseIsAtomicWithMethods(t *testing.T) {
	for range 50 {
		c, read := fakeContext(t)
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		pd.handle = 7
		read()
		var wg sync.WaitGroup
		mws := make(chan *MW, 80)
		for range 4 {
			wg.Go(func() {
				for range 20 {
					mw, err := pd.AllocMW(MWType1)
					if err != nil && !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					if mw != nil {
						mws <- mw
					}
				}
			})
		}
		if err := pd.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		cmds := splitCommands(t, read())
		close(mws)
		for mw := range mws {
			mw.Close()
		}
		for i, cmd := range cmds {
			if cmd == cmdDeallocPD && i != len(cmds)-1 {
				t.Fatalf("command %#x after dealloc_pd: %v", cmds[i+1], cmds)
			}
		}
	}
}

// splitCommands returns the command numbers of the legacy write() commands
// in b, using each header's in_words.
func splitCommands(t *testing.T, b []byte) []uint32 {
	t.Helper()
	var cmds []uint32
	for len(b) > 0 {
		if len(b) < 8 {
			t.Fatalf("%d stray bytes", len(b))
		}
		cmd := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		n := 4 * (int(b[4]) | int(b[5])<<8)
		if n < 8 || n > len(b) {
			t.Fatalf("command %#x of %d bytes in %d", cmd, n, len(b))
		}
		cmds = append(cmds, cmd&^cmdFlagExtended)
		b = b[n:]
	}
	return cmds
}

// Context.Close ends a WaitAsyncEvent blocked with a context that is never
// done, with ErrClosed and well within 100 ms, and the wait has left the
// async fd before Close closes it.
func TestContextCloseWakesWaitAsyncEvent(t *testing.T) {
	c, _ := fakeContext(t)
	r, w := newPipe(t) // a pipe stands in for the async event fd
	defer unix.Close(w)
	rd, err := unix.Dup(r)
	if err != nil {
		t.Fatal(err)
	}
	c.asyncFD = ownFD(rd, "async pipe")
	if c.asyncWait, err = fdwait.New(fdwait.Netpoll); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 2)
	for _, ctx := range []context.Context{context.Background(), t.Context()} {
		go func() {
			_, err := c.WaitAsyncEvent(ctx)
			errc <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // both in poll(2)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("WaitAsyncEvent after Close = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("WaitAsyncEvent still blocked 5 s after Close")
		}
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the waiters took %v to return after Close", d)
	}
	if _, err := c.WaitAsyncEvent(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitAsyncEvent on a closed Context = %v", err)
	}
}

// Context.Close has each provider close its object first, under the
// provider's locks (rxe holds a QP's send lock, so no doorbell follows),
// and only then closes the object itself.
func TestContextCloseCallsProviderClose(t *testing.T) {
	c, read := fakeContext(t)
	o := makeFakeObjects(t, c)
	var sendLock sync.Mutex
	var locked, closedInside bool
	o.qp.OnContextClose(func() error {
		sendLock.Lock()
		defer sendLock.Unlock()
		locked = true
		err := o.qp.Close()
		closedInside = o.qp.gate.closed()
		return err
	})
	read()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !locked || !closedInside {
		t.Fatalf("the provider's close ran: %v; the QP was closed inside it: %v", locked, closedInside)
	}
	if b := read(); len(b) != 0 {
		t.Errorf("Context.Close sent %x: the kernel destroys the objects when the fd closes", b)
	}
}

// The Context holds its children weakly: a PD the program dropped is
// collected while the Context lives, and the leak check reports it.
func TestDroppedChildOfLiveContextIsCollected(t *testing.T) {
	c, _ := fakeContext(t)
	leakcheck.Take()
	func() {
		if _, err := c.AllocPD(); err != nil {
			t.Fatal(err)
		}
	}()
	l := leakcheck.Collect(2 * time.Second)
	if len(l) != 1 || l[0].What != "uverbs.PD handle 0" {
		t.Fatalf("leaks after dropping a PD: %v", l)
	}
	runtime.KeepAlive(c)
}

// A provider registers its Close after it created (and mapped) its object;
// a Context.Close that ran in between must not leave it unrun: the
// provider's Close runs at once, in the registering call, which says
// ErrClosed for the provider to return.
func TestOnContextCloseAfterContextClose(t *testing.T) {
	c, _ := fakeContext(t)
	o := makeFakeObjects(t, c)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	before := func(name string) func() error { return func() error { ran[name]++; return nil } }
	if err := o.cq.OnContextClose(before("cq before")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for name, register := range map[string]func(func() error) error{
		"CQ": o.cq.OnContextClose, "QP": o.qp.OnContextClose, "SRQ": o.srq.OnContextClose, "CompChannel": ch.OnContextClose,
	} {
		if err := register(before(name)); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: registering after Context.Close = %v, want ErrClosed", name, err)
		}
		if ran[name] != 1 {
			t.Errorf("%s: provider Close registered after Context.Close ran %d times, want once", name, ran[name])
		}
	}
	if ran["cq before"] != 1 {
		t.Errorf("provider Close registered before Context.Close ran %d times, want once", ran["cq before"])
	}
}
