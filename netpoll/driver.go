//go:build linux

package netpoll

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// epiocsparams is setEpollParams, replaceable by tests that simulate the
// answers of kernels this one is not (too old, built without busy polling).
var epiocsparams = setEpollParams

// maxEvents is how many epoll events one wait returns.
const maxEvents = 64

// wakeIndex marks the wake eventfd in epoll event data, where a source's
// slot index would be.
const wakeIndex = -1

// Driver polls a set of sources in one loop. Create it with New, add
// sources, then call Run (or Poll repeatedly), and Close it at the end.
type Driver struct {
	cfg Config
	h   Handler

	ep      int      // epoll instance, -1 for plain RecvBusy
	wake    *eventfd // nil unless the backend sleeps
	waitTS  unix.Timespec
	parkTS  *unix.Timespec // nil: park without limit
	running sync.Mutex     // held by Run and Poll
	closing atomic.Bool
	pending atomic.Bool // ops is not empty

	// mu guards the slot bookkeeping shared with Add and Remove.
	mu     sync.Mutex
	used   []slotState
	gens   []uint32
	free   []int
	ops    []op
	spare  []op
	closed bool

	// Owned by the loop.
	slots      []source
	socks, cqs []int // live slots of each kind, rebuilt when stale
	listsStale bool
	events     []unix.EpollEvent
	rx         *recvBuf
	pq         perQueue
	empty      int // Park: consecutive empty passes
	writers    int // streams holding back data for Send

	stats counters
}

// New creates a driver with cfg (zero fields take defaults) reporting to h.
// EpollBusy fails with a *BusyPollError when the kernel refuses
// EPIOCSPARAMS: ErrKernelTooOld before Linux 6.9, ErrNoBusyPoll without
// CONFIG_NET_RX_BUSY_POLL, ErrNeedCapNetAdmin for a budget above 64.
func New(cfg Config, h Handler) (_ *Driver, err error) {
	if h == nil {
		return nil, errors.New("netpoll: nil handler")
	}
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	d := &Driver{
		cfg:    cfg,
		h:      h,
		ep:     -1,
		events: make([]unix.EpollEvent, maxEvents),
		rx:     newRecvBuf(cfg.BufferSize),
		waitTS: unix.NsecToTimespec(cfg.Wait.Truncate(time.Microsecond).Nanoseconds()),
	}
	if cfg.Backend == Park && cfg.Wait > 0 {
		d.parkTS = &d.waitTS
	}
	defer func() {
		if err != nil {
			d.release()
		}
	}()
	if cfg.usesEpoll() {
		if d.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
			d.ep = -1
			return nil, fmt.Errorf("netpoll: epoll_create1: %w", err)
		}
	}
	if cfg.Backend == EpollBusy {
		p := epollParams{
			BusyPollUsecs:  uint32(cfg.BusyPoll / time.Microsecond),
			BusyPollBudget: cfg.BusyPollBudget,
		}
		if p.BusyPollBudget == 0 {
			p.BusyPollBudget = DefaultBusyPollBudget
		}
		if cfg.PreferBusyPoll {
			p.PreferBusyPoll = 1
		}
		if err := busyPollError("EPIOCSPARAMS", epiocsparams(d.ep, &p)); err != nil {
			return nil, err
		}
	}
	if cfg.sleeps() {
		// epoll_pwait2 is Linux 5.11: Park could otherwise fail only at its
		// first block.
		var now unix.Timespec
		if _, e := epollPwait2(d.ep, d.events[:1], &now); e != 0 && e != unix.EINTR {
			return nil, busyPollError("epoll_pwait2", e)
		}
		if d.wake, err = newEventfd(); err != nil {
			return nil, fmt.Errorf("netpoll: eventfd: %w", err)
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeIndex}
		if err := unix.EpollCtl(d.ep, unix.EPOLL_CTL_ADD, d.wake.fd, &ev); err != nil {
			return nil, fmt.Errorf("netpoll: epoll_ctl add eventfd: %w", err)
		}
	}
	return d, nil
}

// release closes the driver's own descriptors.
func (d *Driver) release() {
	if d.ep >= 0 {
		unix.Close(d.ep)
		d.ep = -1
	}
	if d.wake != nil {
		d.wake.close()
	}
}

// Backend is the backend the driver runs.
func (d *Driver) Backend() Backend { return d.cfg.Backend }

// AddFD adds a UDP or TCP (or any datagram or stream) socket. On success the
// driver owns fd and closes it when the source leaves; on error the caller
// keeps it. The descriptor's blocking mode does not matter: every read is
// non-blocking.
func (d *Driver) AddFD(fd int) (ConnID, error) {
	src, err := d.socketSource(fd)
	if err != nil {
		return 0, err
	}
	src.owned = true
	return d.add(src)
}

// AddConn adds the socket under c (a *net.UDPConn, *net.TCPConn, ...). The
// driver reads from its own duplicate of the descriptor and closes that
// duplicate when the source leaves; c stays the caller's, to write with and
// to close. Do not read from c while the driver has it.
func (d *Driver) AddConn(c syscall.Conn) (ConnID, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("netpoll: add conn: %w", err)
	}
	dup := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return 0, fmt.Errorf("netpoll: add conn: %w", err)
	}
	if derr != nil {
		return 0, fmt.Errorf("netpoll: add conn: dup: %w", derr)
	}
	id, err := d.AddFD(dup)
	if err != nil {
		unix.Close(dup)
	}
	return id, err
}

// AddCQ adds a completion queue. The driver never destroys it: once
// OnClosed reports the id, its owner may.
func (d *Driver) AddCQ(cq CompletionQueue) (ConnID, error) {
	if cq == nil {
		return 0, errors.New("netpoll: nil completion queue")
	}
	return d.add(source{kind: kindCQ, fd: cq.FD(), cq: cq})
}

// socketSource checks fd and applies the backend's socket options.
func (d *Driver) socketSource(fd int) (source, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return source{}, fmt.Errorf("netpoll: add fd %d: SO_TYPE: %w", fd, err)
	}
	src := source{fd: fd}
	switch typ {
	case unix.SOCK_DGRAM:
		src.kind = kindDgram
	case unix.SOCK_STREAM:
		src.kind = kindStream
	default:
		return source{}, fmt.Errorf("netpoll: add fd %d: socket type %d is neither datagram nor stream: %w", fd, typ, unix.ESOCKTNOSUPPORT)
	}
	if src.family, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil {
		return source{}, fmt.Errorf("netpoll: add fd %d: SO_DOMAIN: %w", fd, err)
	}
	if d.cfg.Backend == RecvBusy || d.cfg.Backend == EpollBusy {
		if err := d.setBusyPoll(fd); err != nil {
			return source{}, err
		}
	}
	return src, nil
}

// setBusyPoll makes an empty read of fd run a NAPI pass: RecvBusy's every
// read, and EpollBusy's while completion queues keep it from sleeping.
// EpollBusy sets only SO_BUSY_POLL (which needs no capability): its
// preference and budget are the epoll instance's.
func (d *Driver) setBusyPoll(fd int) error {
	set := func(opt string, name, v int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, name, v); err != nil {
			var errno unix.Errno
			if errors.As(err, &errno) {
				return busyPollError(opt, errno)
			}
			return fmt.Errorf("netpoll: %s: %w", opt, err)
		}
		return nil
	}
	if err := set("SO_BUSY_POLL", unix.SO_BUSY_POLL, int(d.cfg.BusyPoll/time.Microsecond)); err != nil {
		return err
	}
	if d.cfg.Backend != RecvBusy {
		return nil
	}
	if d.cfg.PreferBusyPoll {
		if err := set("SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1); err != nil {
			return err
		}
	}
	if d.cfg.BusyPollBudget != 0 {
		if err := set("SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, int(d.cfg.BusyPollBudget)); err != nil {
			return err
		}
	}
	return nil
}

// Remove takes a source out. It leaves at the start of the next pass, when
// the driver closes what it owns and calls OnClosed with Removed. An id
// already removed, or already reported closed, is ErrNoSource.
func (d *Driver) Remove(id ConnID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := id.slot()
	if d.closed {
		return errClosed("remove")
	}
	if i >= len(d.used) || d.used[i] != slotUsed || d.gens[i] != id.gen() {
		return fmt.Errorf("netpoll: remove %v: %w", id, ErrNoSource)
	}
	d.used[i] = slotRemoving
	d.ops = append(d.ops, op{remove: true, index: i, gen: id.gen()})
	d.pending.Store(true)
	d.signal()
	return nil
}

// Stats returns the driver's counters; safe while the loop runs.
func (d *Driver) Stats() Stats { return d.stats.snapshot() }

// Run polls until ctx is done or the driver is closed, on the calling
// goroutine locked to its OS thread. It returns nil then, or the error that
// broke the loop (the epoll instance failing; a failing source only closes
// that source).
func (d *Driver) Run(ctx context.Context) error {
	if !d.running.TryLock() {
		return ErrRunning
	}
	defer d.running.Unlock()
	if d.closing.Load() {
		return errClosed("run")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var stop atomic.Bool
	unregister := context.AfterFunc(ctx, func() {
		stop.Store(true)
		d.signal()
	})
	defer unregister()
	for !stop.Load() && !d.closing.Load() {
		if err := d.pass(); err != nil {
			return err
		}
	}
	return nil
}

// Poll runs one pass on the calling goroutine, for callers that drive the
// loop themselves. It may sleep as the backend does (EpollBusy for up to
// Wait; Park after ParkAfter empty passes).
func (d *Driver) Poll() error {
	if !d.running.TryLock() {
		return ErrRunning
	}
	defer d.running.Unlock()
	if d.closing.Load() {
		return errClosed("poll")
	}
	return d.pass()
}

// Close stops Run, waits for it to return, takes every source out (OnClosed
// with Removed, on the calling goroutine) and releases the driver. It is
// idempotent. Do not call it from a handler: use the context given to Run.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.closing.Store(true)
	d.signal()
	d.running.Lock()
	defer d.running.Unlock()
	d.applyOps()
	for i := range d.slots {
		if d.slots[i].kind != kindNone {
			d.closeSlot(i, Removed, nil)
		}
	}
	d.release()
	return nil
}

// signal wakes a sleeping loop.
func (d *Driver) signal() {
	if d.wake != nil {
		d.wake.signal()
	}
}

// SendTo sends the datagram p to addr on the source's socket without
// blocking (a zero addr sends on a connected socket). Call it from a
// handler. A full socket buffer is an error that wraps EAGAIN: datagrams are
// not held back (see Send for streams). It allocates nothing unless it fails
// with an error other than EAGAIN.
func (d *Driver) SendTo(id ConnID, p []byte, addr netip.AddrPort) (int, error) {
	i, err := d.socketSlot(id)
	if err != nil {
		return 0, err
	}
	s := &d.slots[i]
	if s.kind == kindStream {
		return d.sendStream(i, p)
	}
	n, e := sendTo(s.fd, s.family, p, addr)
	switch e {
	case 0:
		return n, nil
	case unix.EAGAIN:
		return 0, errSendAgain
	}
	return 0, os.NewSyscallError("sendto", e)
}

// socketSlot is the slot of the live socket source id names.
func (d *Driver) socketSlot(id ConnID) (int, error) {
	i := id.slot()
	if i >= len(d.slots) || !d.slots[i].socket() || d.slots[i].gen != id.gen() {
		return 0, ErrNoSource
	}
	return i, nil
}

// errSendAgain is EAGAIN from SendTo, allocated once: a full socket buffer
// is a hot error path.
var errSendAgain = os.NewSyscallError("sendto", unix.EAGAIN)
