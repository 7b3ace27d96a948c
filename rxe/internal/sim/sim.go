// Package sim joins package rxe to its simulator, rxesim, so that rxe need
// not export constructors that only a simulation uses: rxe installs these
// functions when it is initialised, and rxesim calls them to put rxe's own
// queues over rings in ordinary memory.
package sim

import "github.com/pureverbs/pureverbs/rxe/internal/ring"

// Limits are the caps of a simulated queue pair (the fields of
// uverbs.QPCap, which this package cannot import without a cycle).
type Limits struct {
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE, MaxInlineData uint32
}

var (
	// NewCQ returns an *rxe.CQ polling r; it has no kernel object.
	NewCQ func(r *ring.Ring) (any, error)
	// NewQP returns an *rxe.QP posting into sq and rq (rq nil for a QP
	// on an SRQ), calling doorbell once per PostSend that published
	// requests; it has no kernel object.
	NewQP func(sq, rq *ring.Ring, lim Limits, doorbell func() error) (any, error)
)
