package rxe

import "fmt"

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
