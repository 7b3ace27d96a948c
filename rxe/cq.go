package rxe

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/pureverbs/pureverbs/rxe/internal/ring"
	"github.com/pureverbs/pureverbs/uverbs"
)

// cqRing is the consumer side of a completion ring.
type cqRing struct {
	mu   sync.Mutex
	ring *ring.Ring // nil once closed
	cons uint32
	// scratch is the completion pollFunc decodes into, under mu.
	scratch WC
	// dev is the device (nil over a simulated ring): a poll that finds
	// the ring empty returns its removal error.
	dev *uverbs.Context
}

func newCQRing(r *ring.Ring) (*cqRing, error) {
	if r.ElemSize() < wcSize {
		return nil, fmt.Errorf("%w: CQ slots of %d bytes, want at least %d", ErrBadRing, r.ElemSize(), wcSize)
	}
	return &cqRing{ring: r, cons: r.Consumer()}, nil
}

// poll copies up to len(wc) completions out of the ring. It loads the
// producer index once (acquire) before reading any slot and stores the
// consumer index once (release) after the last copy, so the kernel never
// overwrites a slot still being read.
func (c *cqRing) poll(wc []WC) (int, error) {
	return c.pollFunc(len(wc), func(i int, w *WC) { wc[i] = *w })
}

// pollFunc is poll for up to max completions, each decoded into the ring's
// scratch completion and handed to put.
func (c *cqRing) pollFunc(max int, put func(i int, w *WC)) (int, error) {
	c.mu.Lock()
	r := c.ring
	if r == nil {
		c.mu.Unlock()
		return 0, errCQClosed
	}
	prod := r.Producer()
	n := 0
	for n < max && c.cons != prod {
		decodeWC(r.At(c.cons), &c.scratch)
		put(n, &c.scratch)
		c.cons = r.Next(c.cons)
		n++
	}
	if n > 0 {
		r.SetConsumer(c.cons)
	}
	c.mu.Unlock()
	if n == 0 {
		// Completions already there are delivered first; an empty poll
		// of a removed device's CQ would otherwise spin for ever.
		return 0, deviceErr(c.dev)
	}
	return n, nil
}

// detach stops all further polling; it waits for a poll under way.
func (c *cqRing) detach() {
	c.mu.Lock()
	c.ring = nil
	c.mu.Unlock()
}

// CQ is an rxe completion queue: the kernel object and the completion ring
// mapped from it. Poll may be called from several goroutines.
type CQ struct {
	ring *cqRing
	vcq  *uverbs.CQ // nil for a CQ over a simulated ring
	mem  *mapping   // guarded by ring.mu (Resize replaces it)
}

// CreateCQ creates a completion queue on an rxe device and maps its ring
// from the offset and size in the driver's response (struct
// rxe_create_cq_resp). If any step fails, the steps before it are undone.
// A device whose kernel driver is not rdma_rxe is refused with
// ErrNotSupported naming the driver.
func CreateCQ(devctx *uverbs.Context, attr uverbs.CQSpec) (*CQ, error) {
	if err := checkDriver("create_cq", devctx.Device()); err != nil {
		return nil, err
	}
	var resp createCQResp
	vcq, err := devctx.CreateCQ(attr, asBytes(&resp))
	if err != nil {
		return nil, err
	}
	c, err := mapCQ(devctx.Mmap, resp.mi)
	if err != nil {
		if derr := vcq.Close(); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	c.vcq = vcq
	c.ring.dev = devctx
	w := weak.Make(c)
	if err := vcq.OnContextClose(func() error {
		if c := w.Value(); c != nil {
			return c.Close()
		}
		return nil
	}); err != nil {
		return nil, err // the Context closed meanwhile; so did c
	}
	return c, nil
}

// mapCQ maps the ring of a new CQ; on failure it unmaps what it mapped.
func mapCQ(mmap mmapFunc, mi mmInfo) (*CQ, error) {
	mem, r, err := mapRing(mmap, mi)
	if err != nil {
		return nil, err
	}
	c, err := newCQRing(r)
	if err != nil {
		mem.Close()
		return nil, err
	}
	return &CQ{ring: c, mem: mem}, nil
}

// newCQFromRing makes a CQ over a ring a simulated kernel produces into; it
// has no kernel object.
func newCQFromRing(r *ring.Ring) (*CQ, error) {
	c, err := newCQRing(r)
	if err != nil {
		return nil, err
	}
	return &CQ{ring: c}, nil
}

// Poll copies up to len(wc) completions into wc and returns how many. It is
// a memory operation only, and allocates nothing. A poll that finds no
// completion once the device is found removed returns the
// *uverbs.DeviceRemovedError.
func (c *CQ) Poll(wc []WC) (int, error) {
	n, err := c.ring.poll(wc)
	runtime.KeepAlive(c) // its mapping's cleanup would unmap the ring under the poll
	return n, err
}

// PollFunc is Poll for a caller that keeps completions in a form of its own
// (package cq's WC): it decodes up to max completions, one at a time, and
// hands each to put(i, w), under the ring's lock; put must not keep w. It
// allocates nothing when put does not.
func (c *CQ) PollFunc(max int, put func(i int, w *WC)) (int, error) {
	n, err := c.ring.pollFunc(max, put)
	runtime.KeepAlive(c) // see Poll
	return n, err
}

// Verbs returns the kernel CQ (for ReqNotify, its handle, and creating QPs
// on it); nil for a CQ of the simulator.
func (c *CQ) Verbs() *uverbs.CQ { return c.vcq }

// Close destroys the kernel CQ, then stops polling and unmaps the ring. A
// failed destroy leaves the CQ usable and may be retried; once it has
// succeeded, Close does nothing.
func (c *CQ) Close() error {
	if c.vcq != nil {
		if err := c.vcq.Close(); err != nil {
			return err
		}
	}
	return c.release()
}

// release stops polling and unmaps the ring; after the kernel CQ is gone,
// by Close or by the Context's Close. The poll lock also guards mem,
// which Resize replaces.
func (c *CQ) release() error {
	c.ring.mu.Lock()
	defer c.ring.mu.Unlock()
	c.ring.ring = nil
	if c.mem != nil {
		return c.mem.Close()
	}
	return nil
}

// Resize changes the CQ to hold at least cqe completions and returns the
// number the kernel granted. The kernel copies the pending completions into
// a new ring; Resize holds the poll lock from before the command until the
// new ring is mapped and the old one unmapped, so no Poll reads either ring
// midway and no completion is lost or seen twice. rdma_rxe refuses (EINVAL)
// a size below the number of completions pending. If the new ring cannot
// be mapped after the kernel has switched, the CQ can no longer be polled
// (Poll returns ErrClosed) and the error says so.
func (c *CQ) Resize(cqe int) (int, error) {
	if c.vcq == nil {
		return 0, fmt.Errorf("rxe: resize_cq: a simulated CQ: %w", ErrNotSupported)
	}
	c.ring.mu.Lock()
	defer c.ring.mu.Unlock()
	if c.ring.ring == nil {
		return 0, fmt.Errorf("rxe: resize_cq: %w", ErrClosed)
	}
	var resp resizeCQResp
	n, err := c.vcq.Resize(cqe, rawBytes(&resp))
	if err != nil {
		return 0, err
	}
	mem, r, err := mapRing(c.vcq.Context().Mmap, resp.mi)
	if err == nil && r.ElemSize() < wcSize {
		mem.Close()
		err = fmt.Errorf("%w: CQ slots of %d bytes, want at least %d", ErrBadRing, r.ElemSize(), wcSize)
	}
	if err != nil {
		c.ring.ring = nil
		return 0, fmt.Errorf("rxe: resize_cq: the kernel resized the CQ but its new ring cannot be mapped, the CQ is unusable: %w", err)
	}
	old := c.mem
	c.ring.ring, c.ring.cons, c.mem = r, r.Consumer(), mem
	return n, old.Close()
}
