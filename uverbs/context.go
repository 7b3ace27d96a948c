package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// rxeABIMin and rxeABIMax are the driver ABI versions librxe accepts on
// 64-bit machines; the ring layouts used by pureverbs are those.
const (
	rxeABIMin = 1
	rxeABIMax = 2
)

// Context is an open device: the uverbs command fd after GET_CONTEXT, and the
// async event fd the kernel created with it. Its methods, and those of
// every object under it, may be called from several goroutines, Close
// included: once Close has begun they fail with ErrClosed, and nothing
// reaches the kernel.
type Context struct {
	dev            Device
	fd             *fileDesc
	asyncFD        *fileDesc // nil until GET_CONTEXT has made it
	numCompVectors int
	driverID       DriverID
	sysfs          string        // sysfs root for the GID fallback, normally "/sys"
	noIoctl        atomic.Uint32 // ioctlMethod bits the kernel lacks: use write()

	kids   children     // what was created under the Context and is still open
	events eventObjects // the CQs, QPs and SRQs async events name, by user handle
	// gate is held by every command, mmap and event read on the fds;
	// Close shuts it before it closes them.
	gate gate
	// asyncWait is what WaitAsyncEvent waits on the async fd with; Close
	// closes it before it shuts the gate, so that WaitAsyncEvent, which
	// holds the gate while it waits, returns ErrClosed at once.
	asyncWait *fdwait.Poller
	removal   removal // whether the device is still there
	watch     leakcheck.Watch
}

// Open opens d's character device and creates a device context
// (IB_USER_VERBS_CMD_GET_CONTEXT). It refuses a driver ABI version the
// provider does not speak.
func Open(d Device) (*Context, error) {
	if err := checkDriverABI(d); err != nil {
		return nil, err
	}
	raw, err := unix.Open(d.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("uverbs: open %s (%s): %w", d.Path, d.Name, err)
	}
	// Both fds get GC cleanups (a safety net, not a substitute for Close):
	// once they are closed and the rings' own cleanups have unmapped them (a
	// mapping holds the file open), the kernel frees every object of the
	// context. Children hold the Context (and it holds them only weakly),
	// so that runs only when they are unreachable too.
	c := &Context{dev: d, fd: ownFD(raw, "uverbs.Context command fd"), driverID: d.DriverID, sysfs: hostDiscovery.sysfs}
	c.watch = leakcheck.Object(c, "uverbs.Context on "+d.Name, nil, struct{}{})
	var resp respFrame[getContextResp]
	var f writeFrame[getContextCmd]
	f.req = getContextCmd{Response: resp.ptr()}
	if err := execWrite(c, "get_context", cmdGetContext, &f, &resp, nil, 0); err != nil {
		c.fd.close()
		return nil, err
	}
	c.asyncFD = ownFD(int(resp.resp.AsyncFD), "uverbs.Context async event fd")
	c.numCompVectors = int(resp.resp.NumCompVectors)
	if err := unix.SetNonblock(c.asyncFD.int(), true); err != nil {
		c.Close()
		return nil, fmt.Errorf("uverbs: get_context: async fd: %w", err)
	}
	// Netpoll: a goroutine that waits for async events for the Context's
	// life holds no OS thread (see package fdwait).
	p, err := fdwait.New(fdwait.Netpoll)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("uverbs: get_context: %w", err)
	}
	c.asyncWait = p
	if err := c.watchPresence(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// checkDriverABI refuses a driver ABI version the provider does not speak.
// Only rdma_rxe has a provider here; other drivers are left to their users.
func checkDriverABI(d Device) error {
	if d.DriverID == DriverRXE && (d.ABIVersion < rxeABIMin || d.ABIVersion > rxeABIMax) {
		return &ABIError{What: d.Name + " driver ABI", Version: d.ABIVersion, Min: rxeABIMin, Max: rxeABIMax}
	}
	return nil
}

// Device returns the device this context was opened on.
func (c *Context) Device() Device { return c.dev }

// DriverID returns the kernel driver id of the device (DriverUnknown if
// discovery could not tell); Device().Driver names the driver.
func (c *Context) DriverID() DriverID { return c.driverID }

// Mmap maps length bytes the kernel offers at offset of the command file:
// a provider's queue buffers, at the offsets its create responses give
// (PROT_READ|PROT_WRITE, MAP_SHARED). The caller unmaps the memory with
// unix.Munmap; until then the mapping holds the device file open, so the
// kernel keeps the context's objects even after Close.
func (c *Context) Mmap(offset uint64, length int) ([]byte, error) {
	if length <= 0 || offset > 1<<62 {
		return nil, fmt.Errorf("uverbs: mmap offset %#x length %d: %w", offset, length, unix.EINVAL)
	}
	if !c.gate.enter() {
		return nil, closedError("mmap")
	}
	mem, err := unix.Mmap(c.fd.int(), int64(offset), length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	c.gate.leave()
	runtime.KeepAlive(c)
	if err != nil {
		return nil, fmt.Errorf("uverbs: mmap offset %#x length %d: %w", offset, length, err)
	}
	return mem, nil
}

// AsyncFD returns the non-blocking async event fd, for poll or epoll. The
// Context owns it: it is valid until Close and must not be closed by the
// caller. See ReadAsyncEvent.
func (c *Context) AsyncFD() int { return c.asyncFD.int() }

// NumCompVectors is the number of completion vectors of the device.
func (c *Context) NumCompVectors() int { return c.numCompVectors }

// Close closes the Context and everything still open under it: it wakes
// WaitAsyncEvent and completion channel waiters (they return ErrClosed),
// waits for the commands under way, marks every object closed (each under
// its provider's locks, a QP under its send lock, and the providers unmap
// their rings), and closes the async event fd and the command fd, upon
// which the kernel destroys every object of the context, as it does for
// ibv_close_device. Afterwards the process holds no mapping, fd or pinned
// page of the context, whatever the caller forgot to close, and methods of
// the Context and its objects fail with ErrClosed without a system call.
// Close may run concurrently with them. It returns the errors of closing
// the fds, if any, but closes the Context either way; it is idempotent.
func (c *Context) Close() error {
	if c.asyncWait != nil {
		c.asyncWait.Close() // returns once every WaitAsyncEvent has left it
	}
	runtime.KeepAlive(c)
	var err error
	c.gate.shut(func() error {
		c.watch.Closed()
		err = c.kids.closeAll()
		// The fds are gone after close(2) whatever it returns, so the
		// context counts as closed even when an error is reported.
		if e := c.asyncFD.close(); e != nil {
			err = errors.Join(err, fmt.Errorf("uverbs: close async fd: %w", e))
		}
		if e := c.fd.close(); e != nil {
			err = errors.Join(err, fmt.Errorf("uverbs: close %s: %w", c.dev.Path, e))
		}
		if e := c.removal.stop(); e != nil {
			err = errors.Join(err, fmt.Errorf("uverbs: close removal eventfd: %w", e))
		}
		return nil
	})
	return err
}

// released reports whether the context was closed (or is being closed), so
// that the kernel releases every object of it: destroying a child is then
// left to the kernel.
func (c *Context) released() bool { return c.gate.closed() }
