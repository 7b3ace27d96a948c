package streamperf

import (
	"context"
	"net"

	"golang.org/x/sys/unix"
)

// RSocket is the Network of rsockets. Until qp/rsocket lands it refuses
// with EPROTONOSUPPORT; -T s works.
type RSocket struct {
	Log interface{ Write([]byte) (int, error) }
}

// Listen refuses.
func (RSocket) Listen(context.Context, *Options) (net.Listener, error) {
	return nil, unix.EPROTONOSUPPORT
}

// Dial refuses.
func (RSocket) Dial(context.Context, *Options, int) (net.Conn, error) {
	return nil, unix.EPROTONOSUPPORT
}
