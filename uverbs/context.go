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
	fd             int
	asyncFD        int
	numCompVectors int
	driverID       DriverID
	sysfs          string        // sysfs root for the GID fallback, normally "/sys"
	noIoctl        atomic.Uint32 // ioctlMethod bits the kernel lacks: use write()

	kids    children     // what was created under the Context and is still open
	events  eventObjects // the CQs, QPs and SRQs async events name, by user handle
	close   once
	cleanup runtime.Cleanup // closes both fds if the Context is dropped unclosed
}

// Open opens d's character device and creates a device context
// (IB_USER_VERBS_CMD_GET_CONTEXT). It refuses a driver ABI version the
// provider does not speak.
func Open(d Device) (*Context, error) {
	if err := checkDriverABI(d); err != nil {
		return nil, err
	}
	fd, err := unix.Open(d.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("uverbs: open %s (%s): %w", d.Path, d.Name, err)
	}
	c := &Context{dev: d, fd: fd, asyncFD: -1, driverID: d.DriverID, sysfs: hostDiscovery.sysfs}
	var resp respFrame[getContextResp]
	var f writeFrame[getContextCmd]
	f.req = getContextCmd{Response: resp.ptr()}
	if err := execWrite(c, "get_context", cmdGetContext, &f, &resp, nil, 0); err != nil {
		unix.Close(fd)
		return nil, err
	}
	c.asyncFD = int(resp.resp.AsyncFD)
	c.numCompVectors = int(resp.resp.NumCompVectors)
	if err := unix.SetNonblock(c.asyncFD, true); err != nil {
		c.Close()
		return nil, fmt.Errorf("uverbs: get_context: async fd: %w", err)
	}
	// A safety net, not a substitute for Close: once both fds are closed
	// and the rings' own cleanups have unmapped them (a mapping holds the
	// file open), the kernel frees every object of the context. Children
	// hold the Context, so this runs only when they are unreachable too.
	c.cleanup = runtime.AddCleanup(c, func(fds [2]int) {
		unix.Close(fds[0])
		unix.Close(fds[1])
	}, [2]int{c.fd, c.asyncFD})
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

// FD returns the uverbs command fd. Providers mmap queue rings through it;
// it stays owned by the Context.
func (c *Context) FD() int { return c.fd }

// AsyncFD returns the non-blocking async event fd (pollable), owned by the
// Context. See ReadAsyncEvent.
func (c *Context) AsyncFD() int { return c.asyncFD }

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
		c.cleanup.Stop()
		// Both fds are gone after close(2) whatever it returns, so the
		// context counts as closed even when an error is reported.
		if c.asyncFD >= 0 {
			if e := unix.Close(c.asyncFD); e != nil {
				err = errors.Join(err, fmt.Errorf("uverbs: close async fd: %w", e))
			}
		}
		if e := unix.Close(c.fd); e != nil {
			err = errors.Join(err, fmt.Errorf("uverbs: close %s: %w", c.dev.Path, e))
		}
		c.fd, c.asyncFD = -1, -1
		return nil
	})
	return err
}

// released reports whether the context was closed, so that the kernel has
// already released every object of it: destroying a child is then a no-op.
func (c *Context) released() bool { return c.close.closed() }
