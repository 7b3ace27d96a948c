package uverbs

import "sync"

// once runs a destroy command until it succeeds: a failed destroy (EBUSY
// while children exist, say) can be retried, a successful one is not sent
// again, so Close/Destroy methods are idempotent.
type once struct {
	mu   sync.Mutex
	done bool
}

func (o *once) do(destroy func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	if err := destroy(); err != nil {
		return err
	}
	o.done = true
	return nil
}

// closed reports whether the destroy has succeeded.
func (o *once) closed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done
}
