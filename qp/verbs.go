package qp

import "github.com/pureverbs/pureverbs/uverbs"

// Verbs returns the kernel QP. An async event about this QP has it as its
// QP field (uverbs.AsyncEvent.QP == q.Verbs()).
func (q *QP) Verbs() *uverbs.QP { return q.core.Verbs() }
