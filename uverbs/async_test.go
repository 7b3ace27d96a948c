package uverbs

import (
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

func writeAsync(t *testing.T, w int, typ AsyncEventType, element uint64) {
	t.Helper()
	d := asyncEventDesc{Element: element, EventType: uint32(typ)}
	if _, err := unix.Write(w, unsafe.Slice((*byte)(unsafe.Pointer(&d)), unsafe.Sizeof(d))); err != nil {
		t.Fatal(err)
	}
}

// Events name their object: the owner of the CQ, QP or SRQ registered under
// the user handle (the object itself if it has none), nothing for a handle
// two objects share or one no object has, and the port for port events.
func TestAsyncEventResolvesObjects(t *testing.T) {
	r, w := nonblockingPipe(t)
	c := &Context{asyncFD: &fileDesc{raw: r}}
	type userQP struct{ int } // what package qp would wrap the QP in
	owner := &userQP{}
	cq, qp, srq := &CQ{}, &QP{init: QPSpec{Owner: owner}}, &SRQ{}
	hq := c.events.handle(0)
	if hq&autoHandle == 0 || c.events.handle(0) == hq || c.events.handle(7) != 7 {
		t.Fatalf("handle: picked %#x; a given handle must be kept", hq)
	}
	c.events.addCQ(5, cq)
	c.events.addQP(hq, qp)
	c.events.addSRQ(5, srq) // same number as the CQ: another kind, no clash
	c.events.addQP(9, &QP{})
	c.events.addQP(9, &QP{}) // shared: unresolvable
	for _, tc := range []struct {
		typ     AsyncEventType
		element uint64
		want    AsyncEvent
	}{
		{EventCQErr, 5, AsyncEvent{Type: EventCQErr, Element: 5, Object: cq}},
		{EventSQDrained, hq, AsyncEvent{Type: EventSQDrained, Element: hq, Object: owner}},
		{EventQPLastWQEReached, hq, AsyncEvent{Type: EventQPLastWQEReached, Element: hq, Object: owner}},
		{EventSRQLimitReached, 5, AsyncEvent{Type: EventSRQLimitReached, Element: 5, Object: srq}},
		{EventSQDrained, 9, AsyncEvent{Type: EventSQDrained, Element: 9}},
		{EventCQErr, 6, AsyncEvent{Type: EventCQErr, Element: 6}},
		{EventPortErr, 1, AsyncEvent{Type: EventPortErr, Element: 1, Port: 1}},
		{EventDeviceFatal, 1, AsyncEvent{Type: EventDeviceFatal, Element: 1, Port: 1}},
	} {
		writeAsync(t, w, tc.typ, tc.element)
		ev, err := c.ReadAsyncEvent()
		if err != nil || ev != tc.want {
			t.Errorf("%v: ReadAsyncEvent = %+v, %v; want %+v", tc.typ, ev, err, tc.want)
		}
	}
	c.events.removeCQ(5, cq)
	c.events.removeQP(9, &QP{}) // not the registered one: stays unresolvable
	writeAsync(t, w, EventCQErr, 5)
	if ev, _ := c.ReadAsyncEvent(); ev.Object != nil {
		t.Errorf("event for a removed CQ resolved to %v", ev.Object)
	}
	for range 101 { // AllocsPerRun's warm-up run and 100 more
		writeAsync(t, w, EventSQDrained, hq)
	}
	if n := testing.AllocsPerRun(100, func() {
		if ev, err := c.ReadAsyncEvent(); err != nil || ev.Object != owner {
			t.Fatalf("%+v, %v", ev, err)
		}
	}); n != 0 {
		t.Errorf("ReadAsyncEvent allocates %v times", n)
	}
}

// WaitAsyncEvent returns a queued event at once, waits for one, and ends
// with the context's error when it is cancelled.
func TestWaitAsyncEvent(t *testing.T) {
	r, w := nonblockingPipe(t)
	p, err := fdwait.New(fdwait.Netpoll)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := &Context{asyncFD: &fileDesc{raw: r}, asyncWait: p}
	writeAsync(t, w, EventPortActive, 1)
	if ev, err := c.WaitAsyncEvent(context.Background()); err != nil || ev.Type != EventPortActive {
		t.Fatalf("queued: %+v, %v", ev, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		writeAsync(t, w, EventPortErr, 1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ev, err := c.WaitAsyncEvent(ctx); err != nil || ev.Type != EventPortErr || ev.Port != 1 {
		t.Fatalf("waited: %+v, %v", ev, err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel2)
	start := time.Now()
	if _, err := c.WaitAsyncEvent(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if _, err := c.WaitAsyncEvent(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait on a done context = %v", err)
	}
}

func TestEventKinds(t *testing.T) {
	for typ := AsyncEventType(0); typ <= EventWQFatal; typ++ {
		if typ.Kind() == 0 {
			t.Errorf("%v has no kind", typ)
		}
	}
	if AsyncEventType(99).Kind() != 0 {
		t.Error("unknown type has a kind")
	}
}
