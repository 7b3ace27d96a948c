//go:build linux

package netpoll

import (
	"fmt"
	"math"
	"time"
)

// Backend selects how a driver's loop finds work. See the package
// documentation for what each one does.
type Backend int

const (
	// EpollSpin polls epoll with a zero timeout every pass.
	EpollSpin Backend = iota + 1
	// EpollBusy waits in epoll_pwait2 on a busy-polling epoll instance.
	EpollBusy
	// RecvBusy reads every socket every pass with SO_BUSY_POLL set.
	RecvBusy
	// Park spins while data flows and blocks in epoll when it stops.
	Park
)

// Backends lists every backend, in declaration order.
var Backends = []Backend{EpollSpin, EpollBusy, RecvBusy, Park}

// String is the backend's name as ParseBackend and the tools accept it.
func (b Backend) String() string {
	switch b {
	case EpollSpin:
		return "epoll-spin"
	case EpollBusy:
		return "epoll-busy"
	case RecvBusy:
		return "recv-busy"
	case Park:
		return "park"
	}
	return fmt.Sprintf("Backend(%d)", int(b))
}

// ParseBackend is the inverse of Backend.String.
func ParseBackend(s string) (Backend, error) {
	for _, b := range Backends {
		if b.String() == s {
			return b, nil
		}
	}
	return 0, fmt.Errorf("netpoll: unknown backend %q (want epoll-spin, epoll-busy, recv-busy or park)", s)
}

// Defaults applied to zero Config fields.
const (
	// DefaultWait is EpollBusy's epoll_pwait2 timeout.
	DefaultWait = time.Millisecond
	// DefaultBusyPoll is the busy-poll time of EpollBusy and RecvBusy.
	DefaultBusyPoll = 50 * time.Microsecond
	// DefaultBusyPollBudget is the kernel's own default (BUSY_POLL_BUDGET).
	DefaultBusyPollBudget = 8
	// DefaultParkAfter is how many empty passes Park spins before it blocks.
	DefaultParkAfter = 256
	// DefaultBufferSize holds the largest UDP datagram.
	DefaultBufferSize = 64 << 10
	// DefaultSendBuffer is how many bytes Send may hold back per stream.
	DefaultSendBuffer = 4 << 20
)

// Config configures a Driver. Zero fields take the defaults above.
// Durations have microsecond resolution.
type Config struct {
	// Backend is required.
	Backend Backend
	// Wait bounds one sleep. EpollBusy: the epoll_pwait2 timeout (zero means
	// DefaultWait: a zero timeout would skip the busy loop). Park: the
	// longest block (zero: until a source or the wake fd fires).
	Wait time.Duration
	// BusyPoll is how long the kernel busy-polls a queue. EpollBusy: the
	// epoll instance's busy_poll_usecs. RecvBusy: SO_BUSY_POLL on every
	// socket (a non-blocking read polls once whatever the value, as long as
	// it is not zero).
	BusyPoll time.Duration
	// BusyPollBudget is how many packets one busy-poll pass may process
	// (zero: 8). Above 64 needs CAP_NET_ADMIN. EpollBusy passes it with
	// EPIOCSPARAMS; RecvBusy sets SO_BUSY_POLL_BUDGET when it is not zero.
	BusyPollBudget uint16
	// PreferBusyPoll asks the kernel to defer the device's interrupts while
	// the application busy-polls (EPIOCSPARAMS, or SO_PREFER_BUSY_POLL per
	// socket for RecvBusy).
	PreferBusyPoll bool
	// PerQueue makes RecvBusy read one socket per NIC queue instead of
	// every socket. Only valid with RecvBusy.
	PerQueue bool
	// ParkAfter is how many empty passes Park spins before it blocks
	// (zero: DefaultParkAfter).
	ParkAfter int
	// BufferSize is the receive buffer: longer datagrams are truncated
	// (zero: DefaultBufferSize).
	BufferSize int
	// SendBuffer bounds the bytes Send holds back for one stream socket
	// whose kernel buffer is full (zero: DefaultSendBuffer).
	SendBuffer int
}

// withDefaults validates c and fills in zero fields.
func (c Config) withDefaults() (Config, error) {
	switch c.Backend {
	case EpollSpin, EpollBusy, RecvBusy, Park:
	case 0:
		return c, fmt.Errorf("netpoll: config: no backend")
	default:
		return c, fmt.Errorf("netpoll: config: unknown backend %d", int(c.Backend))
	}
	if c.PerQueue && c.Backend != RecvBusy {
		return c, fmt.Errorf("netpoll: config: per-queue needs backend recv-busy, not %v", c.Backend)
	}
	if c.Wait < 0 || c.BusyPoll < 0 || c.ParkAfter < 0 || c.BufferSize < 0 || c.SendBuffer < 0 {
		return c, fmt.Errorf("netpoll: config: negative value")
	}
	if c.BusyPoll/time.Microsecond > math.MaxInt32 {
		return c, fmt.Errorf("netpoll: config: busy-poll time %v too long", c.BusyPoll)
	}
	if c.Wait == 0 && c.Backend == EpollBusy {
		c.Wait = DefaultWait
	}
	if c.BusyPoll == 0 {
		c.BusyPoll = DefaultBusyPoll
	}
	if c.ParkAfter == 0 {
		c.ParkAfter = DefaultParkAfter
	}
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.SendBuffer == 0 {
		c.SendBuffer = DefaultSendBuffer
	}
	return c, nil
}

// sleeps reports whether the backend ever sleeps in epoll: then completion
// channels and the wake fd are in its epoll set.
func (c *Config) sleeps() bool { return c.Backend == EpollBusy || c.Backend == Park }

// usesEpoll reports whether the backend has an epoll instance at all.
func (c *Config) usesEpoll() bool { return c.Backend != RecvBusy || c.PerQueue }

// name is the backend as the benchmark tables label it.
func (c *Config) name() string {
	if c.PerQueue {
		return c.Backend.String() + "+per-queue"
	}
	return c.Backend.String()
}
