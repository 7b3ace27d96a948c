package uverbs

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"weak"
)

// gate admits an object's methods to the kernel until Close shuts it. A
// method holds the gate (enter/leave) from its check to the end of its
// system call; shut refuses new entries, waits for those under way, and
// only then destroys, so that no command with the object's handle can
// follow its destroy: the kernel hands a freed handle to the next object
// created. Entering is two atomic adds and never blocks; a method racing
// with Close either completes first or fails with ErrClosed.
type gate struct {
	users   atomic.Int64  // 2 per method inside, plus gateShut
	drained chan struct{} // made by shut before it sets gateShut
	mu      sync.Mutex    // serialises shut
	done    bool          // under mu: the destroy succeeded
}

const gateShut = 1

// enter reports whether the object is open, and if so holds it open until
// leave.
func (g *gate) enter() bool {
	if g.users.Add(2)&gateShut != 0 {
		g.leave()
		return false
	}
	return true
}

func (g *gate) leave() {
	if g.users.Add(-2) == gateShut {
		select {
		case g.drained <- struct{}{}:
		default:
		}
	}
}

// shut closes the gate, waits until no method is inside, and runs destroy.
// If destroy fails the gate opens again (the object stays usable and Close
// may be retried); once it has succeeded, shut does nothing. destroy must
// not enter the gate itself.
func (g *gate) shut(destroy func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return nil
	}
	if g.drained == nil {
		g.drained = make(chan struct{}, 1)
	}
	g.users.Or(gateShut)
	for g.users.Load() != gateShut {
		<-g.drained
	}
	if err := destroy(); err != nil {
		g.users.And(^int64(gateShut))
		return err
	}
	g.done = true
	return nil
}

// closed reports whether the gate is shut (or being shut).
func (g *gate) closed() bool { return g.users.Load()&gateShut != 0 }

// closedError is what a method of a closed object returns.
func closedError(verb string) error { return fmt.Errorf("uverbs: %s: %w", verb, ErrClosed) }

// Levels in which Context.Close closes what is still open (the kernel
// destroys the objects once the fds close): completion channels first, so
// that their waiters wake at once; then each object before anything it
// uses (memory windows hold their MR and, bound, their QP; QPs use SRQs,
// CQs and PDs; SRQs and MRs use PDs), so that a provider's Close never
// finds what it uses closed under it.
const (
	levelChannel = iota
	levelMW
	levelQP
	levelSRQ
	levelCQMR
	levelPD
	numLevels
)

// child is one object a Context holds. The record refers to the object
// only weakly: a child the program dropped is collected (and its
// cleanups run) while its Context lives on.
type child struct {
	level   int
	close   func() error // the object's Close, if it is still reachable
	closeBy func() error // set by OnContextClose: the provider's Close, run first
	taken   bool         // closeAll has read closeBy: one set later would never run
}

// children is the Context's record of what was created under it and is
// still open.
type children struct {
	mu  sync.Mutex
	set map[*child]struct{}
}

// addChild records obj, whose Close is closeFn; obj's Close removes it
// again with remove.
func addChild[T any](cs *children, level int, obj *T, closeFn func(*T) error) *child {
	w := weak.Make(obj)
	ch := &child{level: level, close: func() error {
		if o := w.Value(); o != nil {
			return closeFn(o)
		}
		return nil
	}}
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

// setCloseBy records the provider's Close of ch's object. A provider
// registers it once its object is complete (rings mapped), and a
// Context.Close may have passed ch in the meantime: then f runs here, and
// setCloseBy returns ErrClosed naming verb, for the provider to return.
func (cs *children) setCloseBy(ch *child, verb string, f func() error) error {
	cs.mu.Lock()
	taken := ch.taken
	if !taken {
		ch.closeBy = f
	}
	cs.mu.Unlock()
	if !taken {
		return nil
	}
	return errors.Join(closedError(verb), f())
}

// closeAll closes every recorded object, level by level, once the
// Context's gate is shut (so the objects send no destroy: the kernel
// releases them all when the command fd closes): the provider's Close
// first (which holds the provider's locks, such as a QP's send lock, while
// it marks the object closed, and unmaps its rings), then the object's
// own, which does nothing if the first one closed it. It returns the
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
			cs.mu.Lock()
			closeBy := ch.closeBy
			ch.taken = true
			cs.mu.Unlock()
			if closeBy != nil {
				if err := closeBy(); err != nil {
					errs = append(errs, err)
				}
			}
			if err := ch.close(); err != nil {
				errs = append(errs, err)
			}
			cs.remove(ch)
		}
	}
	return errors.Join(errs...)
}

// destroyed is the outcome of a destroy command: a Context closed
// meanwhile has had the kernel release the object, which is what the
// destroy was for.
func destroyed(c *Context, err error) error {
	if err != nil && c.released() && errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
