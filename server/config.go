package server

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

// Defaults rogue's rocev2 Server uses, and this package's own.
const (
	DefaultPort        = 1
	DefaultGIDIndex    = -1 // no index: the RoCE v2 GID of the port's netdev (see Config.GIDIndex)
	DefaultMaxPayload  = 9000
	DefaultDepth       = 256
	DefaultMinRNRTimer = 12 // 0.64 ms: 1 causes RNR-NAK storms on rxe, 0 means 655 ms
	DefaultSpinBudget  = time.Millisecond
	DefaultPollBatch   = 16
	DefaultTCPPort     = 18515 // rdma-core's pingpong examples
)

// maxSlab is the largest slab the server allocates, as rogue: 4 GiB.
const maxSlab = 1 << 32

// Config describes a server. Start from DefaultConfig: the zero value of
// Depth, MaxPayload and MinRNRTimer is refused rather than guessed.
type Config struct {
	Device string // rdma device, e.g. "rxe0"
	Port   uint8  // 1-based port; 0 means 1

	// GIDAddr, if valid, chooses the local GID by address: the RoCE v2
	// entry of this IP address (IPv4-mapped for IPv4), as
	// uverbs.Context.FindGID.
	GIDAddr netip.Addr
	// GIDIndex, without GIDAddr, chooses the local GID by its index in the
	// port's table; it must be a populated RoCE v2 entry. DefaultGIDIndex
	// (-1) chooses none by index: the RoCE v2 GID of the port's netdev,
	// IPv4-mapped preferred (uverbs.Context.PortGID), since the order of a
	// fresh link's entries is not fixed (on 6.12 the IPv4 one need not sit
	// at 1).
	GIDIndex int

	// MaxPayload is the size of one receive slot: a SEND longer than this
	// fails (LOC_LEN_ERR; LOC_QP_OP_ERR on 6.1's rxe) and breaks the
	// connection, as RC does.
	MaxPayload int
	// Depth is the number of receive slots, posted and held together.
	Depth int

	// PathMTU for side-channel connections; 0 means the port's active MTU.
	PathMTU uverbs.MTU
	// MinRNRTimer is the RNR NAK delay code for side-channel connections
	// (1..31; 12 = 0.64 ms).
	MinRNRTimer uint8

	// SpinBudget is how long the loop keeps polling an empty CQ before it
	// arms the CQ and parks; 0 means DefaultSpinBudget. A negative value
	// parks at once.
	SpinBudget time.Duration
	// PollBatch is how many completions one poll takes; 0 means 16.
	PollBatch int

	// Handler, when set, is called on the receive thread with every frame;
	// it must Release the frame, now or later from any goroutine. Without a
	// Handler frames go to the Frames channel.
	//
	// The contract: the Handler may call any method of the Server,
	// Close included (Close then returns at once and the teardown ends
	// after the Handler returns; see Close). A panic in it is recovered
	// and counted in Stats.HandlerPanics, and its frame is released; the
	// loop then goes on, or, with PanicStops, the server stops with a
	// *HandlerPanicError. While it runs nothing else is received: a slow
	// Handler (or frames held downstream) throttles the sender through
	// RNR NAKs and loses nothing (see the README for what it costs).
	Handler func(Frame)
	// PanicStops makes a panicking Handler stop the server (Err returns
	// the *HandlerPanicError) instead of being counted and skipped.
	PanicStops bool

	// IdleTimeout ends a connection that receives nothing for this long
	// (ErrIdle): an RC receiver never sends, so a dead sender is noticed
	// no other way unless the side channel's WatchPeer sees its TCP
	// connection close. 0, the default, never times out, which suits an
	// FPGA that pauses between runs; a sender that reconnects through the
	// side channel replaces a dead one at once either way. On a
	// CompleteConnection server ErrIdle stops the server.
	IdleTimeout time.Duration

	// Ring says how the sender numbers its frames in bits 31..8 of the
	// immediate; the default, RingShared, is one counter for all channels,
	// as surf's RoCEv2 dispatcher stamps it.
	Ring RingMode
	// RingSize is the count the sender's position wraps at (surf's
	// AddrWrapCount register, usually the receive depth); 0 means unknown:
	// a position of 0 is then taken for a wrap wherever it comes, a step
	// back to p > 0 followed by p+1 for a wrap that lost 0..p-1, and
	// positions otherwise wrap at 2^24 (RingCounts says what stays
	// ambiguous). Set it when it is known: losses are then counted exactly.
	RingSize uint32
}

// RingMode is how a sender's ring position runs.
type RingMode uint8

// Ring modes.
const (
	// RingShared: one free-running position for all channels (surf's
	// WorkReqDispatcher, rocev2-send's default).
	RingShared RingMode = iota
	// RingPerChannel: each channel has a position of its own.
	RingPerChannel
	// RingOff: positions are not tracked.
	RingOff
)

// String names the mode as rocev2-server's -ring flag does.
func (m RingMode) String() string {
	switch m {
	case RingShared:
		return "shared"
	case RingPerChannel:
		return "channel"
	case RingOff:
		return "off"
	}
	return fmt.Sprintf("RingMode(%d)", uint8(m))
}

// DefaultConfig returns rogue's parameters (port 1, 9000-byte slots, depth
// 256, min RNR timer 12) for device, with the RoCE v2 GID of its port's
// netdev (DefaultGIDIndex).
func DefaultConfig(device string) Config {
	return Config{
		Device:      device,
		Port:        DefaultPort,
		GIDIndex:    DefaultGIDIndex,
		MaxPayload:  DefaultMaxPayload,
		Depth:       DefaultDepth,
		MinRNRTimer: DefaultMinRNRTimer,
	}
}

// ErrConfig is wrapped by every error New returns for an invalid Config
// or a GID/port that does not fit it.
var ErrConfig = errors.New("server: invalid configuration")

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// normalize fills the defaults of zero fields that have one and checks
// everything that needs no device.
func (c Config) normalize() (Config, error) {
	if c.Device == "" {
		return c, configError("no device")
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.GIDIndex < DefaultGIDIndex {
		return c, configError("GID index %d is negative (DefaultGIDIndex, -1, chooses the netdev's GID)", c.GIDIndex)
	}
	if c.Depth <= 0 {
		return c, configError("receive depth %d: need at least one slot", c.Depth)
	}
	if c.Depth > 1<<24 {
		// wr_id carries the slot and the ring position field has 24 bits.
		return c, configError("receive depth %d is above 2^24", c.Depth)
	}
	if c.MaxPayload <= 0 {
		return c, configError("max payload %d: need at least one byte", c.MaxPayload)
	}
	if slab := uint64(c.Depth) * uint64(c.MaxPayload); slab > maxSlab {
		return c, configError("slab of %d × %d bytes = %d exceeds 4 GiB", c.Depth, c.MaxPayload, slab)
	}
	if err := checkMinRNRTimer(c.MinRNRTimer); err != nil {
		return c, err
	}
	if c.PathMTU != 0 {
		if err := checkPathMTU(c.PathMTU, 0); err != nil {
			return c, err
		}
	}
	if c.SpinBudget == 0 {
		c.SpinBudget = DefaultSpinBudget
	}
	if c.PollBatch == 0 {
		c.PollBatch = DefaultPollBatch
	}
	if c.PollBatch < 0 {
		return c, configError("poll batch %d is negative", c.PollBatch)
	}
	if c.Ring > RingOff {
		return c, configError("ring mode %d unknown", c.Ring)
	}
	if c.RingSize > 1<<24 {
		return c, configError("ring size %d is above 2^24 (the position has 24 bits)", c.RingSize)
	}
	if c.IdleTimeout < 0 {
		return c, configError("idle timeout %v is negative", c.IdleTimeout)
	}
	return c, nil
}

// checkMinRNRTimer refuses 0, which the IB spec reads as 655 ms and which
// collapses throughput, and codes above 31.
func checkMinRNRTimer(t uint8) error {
	switch {
	case t == 0:
		return configError("min RNR timer 0 means 655.36 ms and stalls the sender; use 1..31 (12 = 0.64 ms)")
	case t > 31:
		return configError("min RNR timer %d out of range 1..31", t)
	}
	return nil
}

// checkPathMTU checks a path MTU code (1=256 .. 5=4096) and, when active
// is non-zero, that it does not exceed the port's active MTU.
func checkPathMTU(m, active uverbs.MTU) error {
	if m < uverbs.MTU256 || m > uverbs.MTU4096 {
		return configError("path MTU %d out of range 1..5 (1=256 2=512 3=1024 4=2048 5=4096)", uint32(m))
	}
	if active != 0 && m > active {
		return configError("path MTU %d (%d bytes) is above the port's active MTU %d (%d bytes)", uint32(m), m.Bytes(), uint32(active), active.Bytes())
	}
	return nil
}
