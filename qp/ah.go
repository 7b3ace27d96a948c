package qp

import (
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
)

// AH is an address handle: where a UD send goes (SendWR.AH). Make one with
// NewAH; Close destroys it, and the Context's Close destroys it if the
// caller has not.
type AH struct {
	core *rxe.AH
}

// Num is the AH number the kernel assigned, the only address a UD request
// carries on the wire to rdma_rxe.
func (a *AH) Num() uint32 { return a.core.Num() }

// Close destroys the address handle. It is idempotent; requests posted with
// it must have completed.
func (a *AH) Close() error { return a.core.Close() }

// Verbs returns the kernel-object layer's address handle (for providers and
// diagnostics: its handle and attributes).
func (a *AH) Verbs() *uverbs.AH { return a.core.Verbs() }
