package uverbs

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CompChannel is a completion channel: an fd that becomes readable when an
// armed CQ attached to it gets a completion. The fd is non-blocking, so it
// can be polled with epoll/poll.
// A channel dropped without Close has its fd closed by a GC cleanup (and
// the leak check reports it).
type CompChannel struct {
	ctx  *Context
	kid  *child
	fd   *fileDesc
	gate gate
}

// CreateCompChannel creates a completion channel
// (IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	var resp respFrame[createCompChannelResp]
	var f writeFrame[createCompChannelCmd]
	f.req = createCompChannelCmd{Response: resp.ptr()}
	if err := execWrite(c, "create_comp_channel", cmdCreateCompChannel, &f, &resp, nil, 0); err != nil {
		return nil, err
	}
	fd := ownFD(int(resp.resp.FD), "uverbs.CompChannel fd")
	if err := unix.SetNonblock(fd.int(), true); err != nil {
		fd.close()
		return nil, fmt.Errorf("uverbs: create_comp_channel: %w", err)
	}
	ch := &CompChannel{ctx: c, fd: fd}
	ch.kid = addChild(&c.kids, levelChannel, ch, (*CompChannel).Close)
	return ch, nil
}

// OnContextClose registers the provider's Close of the channel for the
// Context's Close to call before anything else it closes: the provider
// wakes the goroutines waiting on the fd and, once they have left it,
// closes this channel. It should refer to the provider's object weakly, or
// the Context keeps it alive. If the Context's Close passed the
// object before the registration, closeFn runs at once and the error
// matches ErrClosed: the provider returns it instead of the object.
func (ch *CompChannel) OnContextClose(closeFn func() error) error {
	return ch.ctx.kids.setCloseBy(ch.kid, "create_comp_channel", closeFn)
}

// FD returns the channel fd (non-blocking), for poll or epoll. The channel
// owns it: it is valid until Close and must not be closed by the caller.
func (ch *CompChannel) FD() int { return ch.fd.int() }

// errNoCompEvent is what ReadEvent returns when no event is queued;
// preallocated so that polling an empty channel allocates nothing.
var errNoCompEvent = &Error{Verb: "read_comp_event", Errno: unix.EAGAIN}

// errCompEventClosed is ReadEvent's ErrClosed, preallocated.
var errCompEventClosed = closedError("read_comp_event")

// ReadEvent reads one completion event without blocking and returns the
// user handle of the CQ it is for (CQSpec.UserHandle). With no event queued
// it returns an error wrapping unix.EAGAIN. Every event read must later be
// accounted for when the CQ is destroyed (see CQ.Close).
func (ch *CompChannel) ReadEvent() (uint64, error) {
	if !ch.gate.enter() {
		return 0, errCompEventClosed
	}
	var d compEventDesc
	errno := readEvent(ch.fd.int(), unsafe.Pointer(&d), unsafe.Sizeof(d))
	ch.gate.leave()
	runtime.KeepAlive(ch)
	switch errno {
	case 0:
		return d.CQHandle, nil
	case unix.EAGAIN:
		return 0, errNoCompEvent
	default:
		return 0, cmdError("read_comp_event", errno)
	}
}

// Close closes the channel fd. The kernel keeps the channel alive while CQs
// use it; destroy them first. Idempotent.
func (ch *CompChannel) Close() error {
	var err error
	ch.gate.shut(func() error {
		// The fd is released even when close(2) reports an error.
		if e := ch.fd.close(); e != nil {
			err = fmt.Errorf("uverbs: close completion channel: %w", e)
		}
		ch.ctx.kids.remove(ch.kid)
		return nil
	})
	return err
}
