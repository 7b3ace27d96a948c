package cq

// Resize changes the CQ to hold at least cqe completions (ibv_resize_cq);
// CQE reports the number granted afterwards. Completions already in the
// queue stay there, in order: none is lost or seen twice, and Poll calls
// from other goroutines wait while the ring is swapped. rdma_rxe refuses
// (EINVAL) a size below the number of completions pending; poll first to
// shrink a busy CQ.
func (c *CQ) Resize(cqe int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	_, err := c.core.Resize(cqe)
	return err
}
