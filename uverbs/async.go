package uverbs

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

// AsyncEventType is enum ib_event_type.
type AsyncEventType uint32

// Async event types.
const (
	EventCQErr            AsyncEventType = 0
	EventQPFatal          AsyncEventType = 1
	EventQPReqErr         AsyncEventType = 2
	EventQPAccessErr      AsyncEventType = 3
	EventCommEst          AsyncEventType = 4
	EventSQDrained        AsyncEventType = 5
	EventPathMig          AsyncEventType = 6
	EventPathMigErr       AsyncEventType = 7
	EventDeviceFatal      AsyncEventType = 8
	EventPortActive       AsyncEventType = 9
	EventPortErr          AsyncEventType = 10
	EventLIDChange        AsyncEventType = 11
	EventPKeyChange       AsyncEventType = 12
	EventSMChange         AsyncEventType = 13
	EventSRQErr           AsyncEventType = 14
	EventSRQLimitReached  AsyncEventType = 15
	EventQPLastWQEReached AsyncEventType = 16
	EventClientReregister AsyncEventType = 17
	EventGIDChange        AsyncEventType = 18
	EventWQFatal          AsyncEventType = 19
)

var asyncEventNames = [...]string{
	"CQ error", "QP fatal", "QP request error", "QP access error", "communication established",
	"SQ drained", "path migrated", "path migration error", "device fatal", "port active",
	"port error", "LID change", "P_Key change", "SM change", "SRQ error", "SRQ limit reached",
	"last WQE reached", "client reregister", "GID change", "WQ fatal",
}

// String describes the event type in words.
func (t AsyncEventType) String() string {
	if int(t) < len(asyncEventNames) {
		return asyncEventNames[t]
	}
	return fmt.Sprintf("event(%d)", uint32(t))
}

// EventKind says what kind of object an async event refers to.
type EventKind uint8

// Event kinds.
const (
	KindCQ     EventKind = iota + 1 // Element is a CQ's user handle
	KindQP                          // Element is a QP's user handle
	KindSRQ                         // Element is an SRQ's user handle
	KindWQ                          // Element is a WQ's user handle
	KindPort                        // Element is the port number
	KindDevice                      // the whole device (Element is a port number)
)

// String names the kind: "CQ", "QP", "SRQ", "WQ", "port", "device".
func (k EventKind) String() string {
	switch k {
	case KindCQ:
		return "CQ"
	case KindQP:
		return "QP"
	case KindSRQ:
		return "SRQ"
	case KindWQ:
		return "WQ"
	case KindPort:
		return "port"
	case KindDevice:
		return "device"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Kind is the kind of object an event of type t refers to; 0 for an
// unknown type.
func (t AsyncEventType) Kind() EventKind {
	switch t {
	case EventCQErr:
		return KindCQ
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained,
		EventPathMig, EventPathMigErr, EventQPLastWQEReached:
		return KindQP
	case EventSRQErr, EventSRQLimitReached:
		return KindSRQ
	case EventWQFatal:
		return KindWQ
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange,
		EventClientReregister, EventGIDChange:
		return KindPort
	case EventDeviceFatal:
		return KindDevice
	}
	return 0
}

// AsyncEvent is one event of the async event fd. Element is what the
// kernel reported: the user handle of the CQ/QP/SRQ it concerns, or the
// port number for port events. The Context resolves it to the object the
// application holds: Object is the *cq.CQ, *qp.QP or *qp.SRQ the event is
// about (the kernel-object layer's *CQ, *QP or *SRQ for one created
// without an Owner, directly through this package) when the object is
// still open under the Context with a user handle no other object of its
// kind shares (the handles the Context picks itself are unique); nil
// otherwise. Compare it with the object, or switch on its type:
//
//	if ev.Object == q { ... } // q is a *qp.QP
type AsyncEvent struct {
	Type    AsyncEventType
	Element uint64
	Object  any   // for KindCQ, KindQP and KindSRQ events: the object, or nil
	Port    uint8 // for KindPort and KindDevice events
}

// String describes the event and what it refers to.
func (e AsyncEvent) String() string {
	switch e.Type.Kind() {
	case KindCQ, KindQP, KindSRQ:
		if n, ok := e.Object.(interface{ Num() uint32 }); ok {
			return fmt.Sprintf("%v on %v %#x", e.Type, e.Type.Kind(), n.Num())
		}
		if e.Object != nil {
			return fmt.Sprintf("%v on %v (element %#x)", e.Type, e.Type.Kind(), e.Element)
		}
	case KindPort, KindDevice:
		return fmt.Sprintf("%v on port %d", e.Type, e.Port)
	}
	return fmt.Sprintf("%v (element %#x)", e.Type, e.Element)
}

// errNoAsyncEvent is what ReadAsyncEvent returns when no event is queued;
// preallocated so that polling allocates nothing.
var errNoAsyncEvent = &Error{Verb: "read_async_event", Errno: unix.EAGAIN}

// ReadAsyncEvent reads one async event without blocking. With no event
// queued it returns an error wrapping unix.EAGAIN. It allocates nothing.
func (c *Context) ReadAsyncEvent() (AsyncEvent, error) {
	if !c.gate.enter() {
		return AsyncEvent{}, closedError("read_async_event")
	}
	defer c.gate.leave()
	return c.readAsyncEvent()
}

// readAsyncEvent is ReadAsyncEvent inside the gate.
func (c *Context) readAsyncEvent() (AsyncEvent, error) {
	var d asyncEventDesc
	errno := readEvent(c.asyncFD.int(), unsafe.Pointer(&d), unsafe.Sizeof(d))
	runtime.KeepAlive(c) // its cleanup closes the async fd
	switch errno {
	case 0:
		return c.events.resolve(AsyncEventType(d.EventType), d.Element), nil
	case unix.EAGAIN:
		return AsyncEvent{}, errNoAsyncEvent
	default:
		return AsyncEvent{}, cmdError("read_async_event", errno)
	}
}

// WaitAsyncEvent returns the next async event, waiting for one while none
// is queued (an fdwait.Poller wait on the async fd), so that cancelling
// ctx ends the wait with ctx.Err(). rdma_rxe raises port events (the
// netdev going down or up), CQ errors (overrun), SRQ limit and SQ drained
// events, and on 6.12 (not 6.1) last-WQE-reached; it never raises a
// device-fatal event: see the package documentation about removing a
// device. Once the device is found removed (see ErrDeviceRemoved) it
// returns the events still queued, then the removal error. The waiting
// goroutine parks (fdwait's Netpoll mode) and holds no OS thread. Close
// ends it with ErrClosed.
func (c *Context) WaitAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	const verb = "wait_async_event"
	if !c.gate.enter() {
		return AsyncEvent{}, closedError(verb)
	}
	defer c.gate.leave()
	for {
		if c.gate.closed() { // Close is waiting for this wait to end
			return AsyncEvent{}, closedError(verb)
		}
		ev, err := c.readAsyncEvent()
		if err != errNoAsyncEvent {
			return ev, err
		}
		if err := c.Err(); err != nil { // the events queued before it were returned
			return AsyncEvent{}, err
		}
		err = c.asyncWait.Wait(ctx, time.Time{}, c.asyncFD.int(), c.removal.fd.int())
		runtime.KeepAlive(c)
		switch {
		case err == nil:
		case errors.Is(err, fdwait.ErrClosed):
			return AsyncEvent{}, closedError(verb)
		case err == ctx.Err():
			return AsyncEvent{}, err
		default:
			return AsyncEvent{}, fmt.Errorf("uverbs: %s: %w", verb, err)
		}
	}
}

// autoHandle marks the user handles the Context picks itself, so that they
// never meet small handles chosen by callers.
const autoHandle = 1 << 63

// eventObjects indexes the open CQs, QPs and SRQs of a Context by their
// user handles, for ReadAsyncEvent; weakly, so that a dropped object is
// still collected. A handle shared by two objects of one kind maps to
// nothing: the event cannot say which it meant.
type eventObjects struct {
	next atomic.Uint64
	mu   sync.Mutex
	cqs  map[uint64]weak.Pointer[CQ]
	qps  map[uint64]weak.Pointer[QP]
	srqs map[uint64]weak.Pointer[SRQ]
}

// handle returns h, or a new handle unique in the Context when h is 0.
func (e *eventObjects) handle(h uint64) uint64 {
	if h != 0 {
		return h
	}
	return autoHandle | e.next.Add(1)
}

func addObject[T any](mu *sync.Mutex, m *map[uint64]weak.Pointer[T], h uint64, o *T) {
	mu.Lock()
	defer mu.Unlock()
	if *m == nil {
		*m = make(map[uint64]weak.Pointer[T])
	}
	if _, dup := (*m)[h]; dup {
		(*m)[h] = weak.Pointer[T]{}
		return
	}
	(*m)[h] = weak.Make(o)
}

func removeObject[T any](mu *sync.Mutex, m map[uint64]weak.Pointer[T], h uint64, o *T) {
	mu.Lock()
	defer mu.Unlock()
	if m[h] == weak.Make(o) {
		delete(m, h)
	}
}

func (e *eventObjects) addCQ(h uint64, o *CQ)      { addObject(&e.mu, &e.cqs, h, o) }
func (e *eventObjects) addQP(h uint64, o *QP)      { addObject(&e.mu, &e.qps, h, o) }
func (e *eventObjects) addSRQ(h uint64, o *SRQ)    { addObject(&e.mu, &e.srqs, h, o) }
func (e *eventObjects) removeCQ(h uint64, o *CQ)   { removeObject(&e.mu, e.cqs, h, o) }
func (e *eventObjects) removeQP(h uint64, o *QP)   { removeObject(&e.mu, e.qps, h, o) }
func (e *eventObjects) removeSRQ(h uint64, o *SRQ) { removeObject(&e.mu, e.srqs, h, o) }

// resolve builds the event, with the object it refers to.
func (e *eventObjects) resolve(t AsyncEventType, element uint64) AsyncEvent {
	ev := AsyncEvent{Type: t, Element: element}
	switch t.Kind() {
	case KindPort, KindDevice:
		ev.Port = uint8(element)
		return ev
	case KindCQ, KindQP, KindSRQ:
	default:
		return ev
	}
	e.mu.Lock()
	switch t.Kind() {
	case KindCQ:
		if o := e.cqs[element].Value(); o != nil {
			ev.Object = eventObject(o.owner, o)
		}
	case KindQP:
		if o := e.qps[element].Value(); o != nil {
			ev.Object = eventObject(o.init.Owner, o)
		}
	case KindSRQ:
		if o := e.srqs[element].Value(); o != nil {
			ev.Object = eventObject(o.owner, o)
		}
	}
	e.mu.Unlock()
	return ev
}

// eventObject is what an event reports for an object: its owner, or the
// object itself when it has none.
func eventObject(owner, self any) any {
	if owner != nil {
		return owner
	}
	return self
}
