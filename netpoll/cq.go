//go:build linux

package netpoll

// CompletionQueue is a completion queue as the driver polls it. Package
// netpoll/cqsource adapts cq's queues to it (netpoll itself does not import
// the verbs packages). The driver calls every method on its loop's goroutine
// only.
//
// Every pass calls Drain. Before a backend sleeps it calls Arm on each queue
// not armed yet, then Drain once more (a completion that arrived before the
// arm raises no event), and sleeps only if that found nothing; FD is then in
// its epoll set. When FD becomes readable the driver calls Consume and
// counts the queue as unarmed again.
type CompletionQueue interface {
	// Drain polls every ready completion from memory and delivers them to
	// the queue's owner. It returns how many there were. An error closes
	// this source only.
	Drain() (int, error)
	// Arm requests an event on the channel for the next completion
	// (req_notify_cq). It must not drain.
	Arm() error
	// FD is the pollable completion-channel descriptor. The driver never
	// closes it.
	FD() int
	// Consume reads and acknowledges the pending channel events without
	// blocking; having none is not an error.
	Consume() error
}
