package uverbs

import (
	"fmt"
	"runtime"
	"unsafe"

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

// AsyncEvent is one event of the async event fd. Element is the user handle
// of the CQ/QP/SRQ it concerns, or the port number for port events.
type AsyncEvent struct {
	Type    AsyncEventType
	Element uint64
}

// errNoAsyncEvent is what ReadAsyncEvent returns when no event is queued;
// preallocated so that polling allocates nothing.
var errNoAsyncEvent = &Error{Verb: "read_async_event", Errno: unix.EAGAIN}

// ReadAsyncEvent reads one async event without blocking. With no event
// queued it returns an error wrapping unix.EAGAIN.
func (c *Context) ReadAsyncEvent() (AsyncEvent, error) {
	var d asyncEventDesc
	errno := readEvent(c.asyncFD.int(), unsafe.Pointer(&d), unsafe.Sizeof(d))
	runtime.KeepAlive(c) // its cleanup closes the async fd
	switch errno {
	case 0:
		return AsyncEvent{Type: AsyncEventType(d.EventType), Element: d.Element}, nil
	case unix.EAGAIN:
		return AsyncEvent{}, errNoAsyncEvent
	default:
		return AsyncEvent{}, cmdError("read_async_event", errno)
	}
}
