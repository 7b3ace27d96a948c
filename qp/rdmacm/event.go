package rdmacm

import "github.com/pureverbs/pureverbs/qp/rdmacm/ucma"

// EventType is the kind of a CM event (enum rdma_cm_event_type, whose
// values it keeps).
type EventType uint32

// CM events. A connection's WaitEvent reports DISCONNECTED,
// DEVICE_REMOVAL, UNREACHABLE, TIMEWAIT_EXIT and ADDR_CHANGE; the others
// appear in EventError, naming the event a step ended with.
const (
	EventAddrResolved    = EventType(ucma.EventAddrResolved)
	EventAddrError       = EventType(ucma.EventAddrError)
	EventRouteResolved   = EventType(ucma.EventRouteResolved)
	EventRouteError      = EventType(ucma.EventRouteError)
	EventConnectRequest  = EventType(ucma.EventConnectRequest)
	EventConnectResponse = EventType(ucma.EventConnectResponse)
	EventConnectError    = EventType(ucma.EventConnectError)
	EventUnreachable     = EventType(ucma.EventUnreachable)
	EventRejected        = EventType(ucma.EventRejected)
	EventEstablished     = EventType(ucma.EventEstablished)
	EventDisconnected    = EventType(ucma.EventDisconnected)
	EventDeviceRemoval   = EventType(ucma.EventDeviceRemoval)
	EventMulticastJoin   = EventType(ucma.EventMulticastJoin)
	EventMulticastError  = EventType(ucma.EventMulticastError)
	EventAddrChange      = EventType(ucma.EventAddrChange)
	EventTimewaitExit    = EventType(ucma.EventTimewaitExit)
)

// String is the event's name as rdma_event_str gives it, without
// RDMA_CM_EVENT_.
func (t EventType) String() string { return ucma.EventType(t).String() }
