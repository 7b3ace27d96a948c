package uverbs

import (
	"errors"
	"sync"
	"sync/atomic"
)

// once runs a destroy command until it succeeds: a failed destroy (EBUSY
// while children exist, say) can be retried, a successful one is not sent
// again, so Close/Destroy methods are idempotent.
type once struct {
	mu   sync.Mutex
	done atomic.Bool // read without mu: a Context's Close asks it of itself while destroying its children
}

func (o *once) do(destroy func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done.Load() {
		return nil
	}
	if err := destroy(); err != nil {
		return err
	}
	o.done.Store(true)
	return nil
}

// closed reports whether the destroy has succeeded.
func (o *once) closed() bool { return o.done.Load() }

// Levels in which Context.Close destroys what is still open: each object
// before anything it uses (memory windows hold their MR and, bound, their
// QP; QPs use SRQs, CQs and PDs; SRQs and MRs use PDs; CQs use channels).
const (
	levelMW = iota
	levelQP
	levelSRQ
	levelCQMR
	levelPD
	levelChannel
	numLevels
)

// child is one object a Context holds: how to destroy it, and what its
// provider must release once the Context's Close has destroyed it.
type child struct {
	level   int
	destroy func() error
	release func() // set by OnContextClose; nil if none
}

// children is the Context's record of what was created under it and is
// still open.
type children struct {
	mu  sync.Mutex
	set map[*child]struct{}
}

// add records an object; its Close removes it again with remove.
func (cs *children) add(level int, destroy func() error) *child {
	ch := &child{level: level, destroy: destroy}
	cs.mu.Lock()
	if cs.set == nil {
		cs.set = make(map[*child]struct{})
	}
	cs.set[ch] = struct{}{}
	cs.mu.Unlock()
	return ch
}

func (cs *children) remove(ch *child) {
	cs.mu.Lock()
	delete(cs.set, ch)
	cs.mu.Unlock()
}

// setRelease records what the provider releases after a Context-driven
// destroy of ch.
func (cs *children) setRelease(ch *child, f func()) {
	cs.mu.Lock()
	ch.release = f
	cs.mu.Unlock()
}

// closeAll destroys every recorded object, level by level, and runs the
// providers' releases (unmapping rings) whether or not the destroy
// succeeded: the Context is going away either way. It returns the destroy
// errors joined.
func (cs *children) closeAll() error {
	cs.mu.Lock()
	var levels [numLevels][]*child
	for ch := range cs.set {
		levels[ch.level] = append(levels[ch.level], ch)
	}
	cs.mu.Unlock()
	var errs []error
	for _, level := range levels {
		for _, ch := range level {
			if err := ch.destroy(); err != nil {
				errs = append(errs, err)
			}
			cs.mu.Lock()
			release := ch.release
			delete(cs.set, ch)
			cs.mu.Unlock()
			if release != nil {
				release()
			}
		}
	}
	return errors.Join(errs...)
}
