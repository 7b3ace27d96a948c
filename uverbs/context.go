package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// rxeABIMin and rxeABIMax are the driver ABI versions librxe accepts on
// 64-bit machines; the ring layouts used by pureverbs are those.
const (
	rxeABIMin = 1
	rxeABIMax = 2
)

// Context is an open device: the uverbs command fd after GET_CONTEXT, and the
// async event fd the kernel created with it. Its methods may be called from
// several goroutines, but not concurrently with Close.
type Context struct {
	dev            Device
	fd             *fileDesc
	asyncFD        *fileDesc // nil until GET_CONTEXT has made it
	numCompVectors int
	driverID       DriverID
	sysfs          string        // sysfs root for the GID fallback, normally "/sys"
	noIoctl        atomic.Uint32 // ioctlMethod bits the kernel lacks: use write()

	kids  children // what was created under the Context and is still open
	close once
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
	// context. Children hold the Context, so that runs only when they are
	// unreachable too.
	c := &Context{dev: d, fd: ownFD(raw), driverID: d.DriverID, sysfs: hostDiscovery.sysfs}
	var resp respFrame[getContextResp]
	var f writeFrame[getContextCmd]
	f.req = getContextCmd{Response: resp.ptr()}
	if err := execWrite(c, "get_context", cmdGetContext, &f, &resp, nil, 0); err != nil {
		c.fd.close()
		return nil, err
	}
	c.asyncFD = ownFD(int(resp.resp.AsyncFD))
	c.numCompVectors = int(resp.resp.NumCompVectors)
	if err := unix.SetNonblock(c.asyncFD.int(), true); err != nil {
		c.Close()
		return nil, fmt.Errorf("uverbs: get_context: async fd: %w", err)
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
	mem, err := unix.Mmap(c.fd.int(), int64(offset), length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
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

// Close destroys whatever is still open under the Context, each object
// before what it uses (QPs, then CQs and MRs, then PDs, then completion
// channels), has providers unmap their rings, and closes the async event fd
// and the command fd. Afterwards the process holds no mapping, fd or pinned
// page of the context, whatever the caller forgot to close; objects of it
// report ErrClosed or do nothing. Close must not run concurrently with
// methods of the Context or of its objects. It returns the first errors of
// the destroys, if any, but closes the Context either way; it is
// idempotent.
func (c *Context) Close() error {
	var err error
	c.close.do(func() error {
		err = c.kids.closeAll()
		// Both fds are gone after close(2) whatever it returns, so the
		// context counts as closed even when an error is reported.
		if e := c.asyncFD.close(); e != nil {
			err = errors.Join(err, fmt.Errorf("uverbs: close async fd: %w", e))
		}
		if e := c.fd.close(); e != nil {
			err = errors.Join(err, fmt.Errorf("uverbs: close %s: %w", c.dev.Path, e))
		}
		return nil
	})
	return err
}

// released reports whether the context was closed, so that the kernel has
// already released every object of it: destroying a child is then a no-op.
func (c *Context) released() bool { return c.close.closed() }
