package ucma

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

// EventType is enum rdma_cm_event_type.
type EventType uint32

// RDMA CM events.
const (
	EventAddrResolved    EventType = 0
	EventAddrError       EventType = 1
	EventRouteResolved   EventType = 2
	EventRouteError      EventType = 3
	EventConnectRequest  EventType = 4
	EventConnectResponse EventType = 5
	EventConnectError    EventType = 6
	EventUnreachable     EventType = 7
	EventRejected        EventType = 8
	EventEstablished     EventType = 9
	EventDisconnected    EventType = 10
	EventDeviceRemoval   EventType = 11
	EventMulticastJoin   EventType = 12
	EventMulticastError  EventType = 13
	EventAddrChange      EventType = 14
	EventTimewaitExit    EventType = 15
)

var eventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
	"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
	"DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
	"TIMEWAIT_EXIT",
}

// String is the event's name as rdma_event_str gives it, without
// RDMA_CM_EVENT_.
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint32(t))
}

// UDParam are the UD parameters of an event of a UDP-space id or a
// multicast group (struct rdma_ud_param): the remote QPN and Q_Key of a
// SIDR reply, the address vector towards the peer or group.
type UDParam struct {
	QPNum       uint32
	QKey        uint32
	AH          uverbs.AHAttr
	PrivateData []byte
}

// Event is one event read from a Channel (struct rdma_ucm_event_resp).
type Event struct {
	// UID is the uid the event's id was created or accepted with (for a
	// CONNECT_REQUEST: the listener's); for multicast events the uid given
	// to JoinMulticast.
	UID uint64
	// ID is the kernel's handle of the id; for a CONNECT_REQUEST that of
	// the new id the request created, for multicast events the
	// membership's.
	ID   uint32
	Type EventType
	// Status is the event's status as the kernel reports it: a negative
	// errno (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, CONNECT_ERROR) or, for
	// REJECTED on RoCE and InfiniBand, the IB CM reject reason (positive).
	Status int32
	ECE    ECE
	// param is the union of the connection and the UD parameters; which
	// one applies the event's id says (ConnParam, UDParam).
	// uint32 words keep it 4-byte aligned, as both members need.
	param [304 / 4]uint32
}

// Errno is the event's status as an errno, for the events whose status is
// one (0 when it is 0 or positive).
func (e *Event) Errno() unix.Errno {
	if e.Status >= 0 {
		return 0
	}
	return unix.Errno(-e.Status)
}

// errNoEvent is ReadEvent's EAGAIN.
var errNoEvent = &Error{Verb: "rdma_get_cm_event", Errno: unix.EAGAIN}

// ReadEvent reads the next event without blocking (rdma_get_cm_event on a
// non-blocking channel, RDMA_USER_CM_CMD_GET_EVENT). With none queued it
// returns an error wrapping unix.EAGAIN.
func (ch *Channel) ReadEvent() (Event, error) {
	var resp ucmaEventResp
	cmd := ucmaGetEvent{Response: ptr64{unsafe.Pointer(&resp)}}
	if err := ucmaWrite(ch, "rdma_get_cm_event", ucmaCmdGetEvent, &cmd, unsafe.Sizeof(resp)); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Errno == unix.EAGAIN {
			return Event{}, errNoEvent
		}
		return Event{}, err
	}
	return eventFrom(&resp), nil
}

func eventFrom(r *ucmaEventResp) Event {
	return Event{UID: r.UID, ID: r.ID, Type: EventType(r.Event), Status: int32(r.Status), ECE: ECE(r.ECE), param: *(*[304 / 4]uint32)(unsafe.Pointer(&r.Param))}
}

// ConnParam returns the event's connection parameters (ids in the TCP and
// IB port spaces): the peer's private data, QPN and negotiated depths, as
// seen from this side (a CONNECT_REQUEST's ResponderResources is what this
// side may grant: the requester's initiator depth).
func (e *Event) ConnParam() ConnParam {
	return connParamFrom((*ucmaConnParam)(unsafe.Pointer(&e.param)))
}

// UDParam returns the event's UD parameters (ids in the UDP port space and
// multicast events): the SIDR reply's remote QPN and Q_Key, the address
// vector towards the peer or group, the private data.
func (e *Event) UDParam() UDParam {
	u := (*ucmaUDParam)(unsafe.Pointer(&e.param))
	return UDParam{
		QPNum:       u.QPNum,
		QKey:        u.QKey,
		AH:          u.AHAttr.Attr(),
		PrivateData: append([]byte(nil), u.PrivateData[:u.PrivateDataLen]...),
	}
}

// WaitEvent returns the next event, waiting for one while none is queued:
// the goroutine parks (an fdwait.Poller wait, Netpoll) until the channel
// is readable, ctx is done (ctx.Err()) or the channel is closed
// (ErrClosed). Concurrent WaitEvents may each return an event; a waiter
// that finds the queue taken waits again.
func (ch *Channel) WaitEvent(ctx context.Context) (Event, error) {
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	for {
		ev, err := ch.ReadEvent()
		if err != errNoEvent {
			return ev, err
		}
		switch err := ch.wait.Wait(ctx, time.Time{}, ch.fd); {
		case err == nil:
		case errors.Is(err, fdwait.ErrClosed):
			return Event{}, fmt.Errorf("ucma: rdma_get_cm_event: %w", ErrClosed)
		case err == ctx.Err():
			return Event{}, err
		default:
			return Event{}, fmt.Errorf("ucma: rdma_get_cm_event: %w", err)
		}
	}
}
