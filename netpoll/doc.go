// Package netpoll runs low-latency receive loops over sockets and RDMA
// completion queues, as an alternative to Go's own netpoller.
//
// A [Driver] owns a set of sources and polls them all in one loop on a
// locked OS thread ([Driver.Run]) or one pass at a time ([Driver.Poll]).
// Sources are UDP and TCP sockets (raw descriptors or net.Conn and
// net.PacketConn values, through their SyscallConn) and completion queues
// ([CompletionQueue]; package netpoll/cqsource adapts cq's, so a program
// that polls only sockets does not link the verbs packages). Data and closes
// are reported to a [Handler].
//
// # Backends
//
//   - [EpollSpin]: epoll_wait with a zero timeout every pass, then one recvmsg
//     per ready socket. Level-triggered: data left behind is reported again.
//     Never sleeps.
//   - [EpollBusy]: epoll_pwait2 with [Config.Wait] on an epoll instance
//     configured with EPIOCSPARAMS (Linux 6.9+): with nothing ready the
//     kernel polls the NIC queue for [Config.BusyPoll], then sleeps until an
//     event or the timeout. A zero timeout would skip the busy loop, so this
//     backend sleeps by design. One epoll instance tracks one NAPI id: with
//     sockets on several RX queues only one queue is busy-polled. A pass
//     that must not sleep because completion queues had work polls each
//     socket queue once instead, as RecvBusy with PerQueue does (sockets
//     get SO_BUSY_POLL for it), so busy completion queues do not stop the
//     sockets' busy polling.
//   - [RecvBusy]: no epoll. A non-blocking recvmsg on every socket every
//     pass, with SO_BUSY_POLL set on each: an empty read runs one NAPI pass
//     in the kernel, then returns EAGAIN. Never sleeps; one syscall per
//     socket per pass.
//   - [RecvBusy] with [Config.PerQueue]: one read per NIC queue (one
//     representative socket per NAPI id, learned with SO_INCOMING_NAPI_ID;
//     every socket whose queue is not known yet is read too), which polls
//     every queue once, then epoll_wait(0) for the sockets those passes made
//     ready. Adding or removing a socket, and every 4096th pass, forgets the
//     cached ids, so a reused slot or a queue moved by RSS is relearned.
//   - [Park]: spin (epoll_wait(0), completion queues polled from memory)
//     while data flows; after [Config.ParkAfter] empty passes, arm the
//     completion queues and block in epoll until a source or the wake fd
//     fires.
//
// Every backend polls every completion queue from memory on every pass.
// Backends that sleep (EpollBusy, Park) arm each queue and watch its channel
// fd before sleeping.
//
// # Arm, then poll again
//
// Arming a completion queue asks for an event on the next completion; a
// completion that arrived before the arm raises none. So the driver arms
// first and then drains every queue once more: only if that finds nothing
// does it sleep. A [CompletionQueue] must not drain as part of Arm.
//
// # Threads
//
// Handlers run on the loop's goroutine. Add*, Remove and Stats are safe from
// any goroutine at any time, including from handlers; additions and
// removals take effect at the start of the next pass. Send, SendTo and
// Buffered are for handlers (or the goroutine calling Poll).
//
// # Sending
//
// Send never blocks. On a stream whose kernel buffer is full it holds the
// rest back (up to [Config.SendBuffer] per stream), watches the socket for
// writability (EPOLLOUT; RecvBusy without PerQueue retries every pass) and
// writes it, in order and before anything sent later, as the peer reads.
// Datagrams are never held back: a full buffer is an EAGAIN error.
//
// # Ids
//
// A [ConnID] is a slot and the slot's generation. A slot is reused only after
// [Handler.OnClosed] for its previous source has returned, and a stale id (one
// whose source is gone) is ErrNoSource for Remove, Send and Buffered, never
// the slot's new source.
package netpoll
