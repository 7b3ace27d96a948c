package rxe

import (
	"github.com/pureverbs/pureverbs/rxe/internal/ring"
	"github.com/pureverbs/pureverbs/rxe/internal/sim"
	"github.com/pureverbs/pureverbs/uverbs"
)

// doorbellFunc rings a simulated kernel's doorbell.
type doorbellFunc func() error

func (f doorbellFunc) PostSendDoorbell() error { return f() }

func init() {
	sim.NewCQ = func(r *ring.Ring) (any, error) { return newCQFromRing(r) }
	sim.NewQP = func(sq, rq *ring.Ring, lim sim.Limits, db func() error) (any, error) {
		return newQPFromRings(sq, rq, uverbs.QPCap(lim), doorbellFunc(db))
	}
}
