package rsocket

import (
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// rsocket's defaults (librdmacm/rsocket.c, without /etc/rdma/rsocket).
const (
	DefaultQueueSize  = 384
	DefaultInline     = 64
	DefaultBufferSize = 128 << 10
	// DefaultPollTime is how long a Read or Write that cannot go on polls
	// the completion queue before it parks, rsocket's polling_time.
	DefaultPollTime = 10 * time.Microsecond
)

const (
	// ctrlSlots is how many control messages (credit updates, shutdown,
	// disconnect) may be outstanding; the send queue keeps them free of
	// data.
	ctrlSlots = 4
	// minQueueSize and maxQueueSize bound the queue sizes as rsocket does.
	minQueueSize = 16
	maxQueueSize = 0xFFFE
	// sendLowWater is the free send buffer a data write waits for.
	sendLowWater = 2 << 10
	// firstWrite and maxWrite: each Write starts with a 2 KiB message and
	// doubles up to 64 KiB, so that the peer sees data early.
	firstWrite = 2 << 10
	maxWrite   = 64 << 10
	// minBuffer keeps the ring halves above the send low-water mark.
	minBuffer = 8 << 10
	// maxBuffer keeps a ring half describable by an immediate (29 bits).
	maxBuffer = 256 << 20
)

// Options are the choices of Dial and Listen. The zero value gives
// rsocket's defaults: send and receive queues of 384, 64 bytes inline,
// 128 KiB send buffer and receive ring.
type Options struct {
	// Source is the local address Dial connects from (rbind before
	// rconnect); it picks the RDMA device. Invalid lets the routing table
	// choose.
	Source netip.Addr
	// SendQueue and RecvQueue are the QP's queue sizes (RDMA_SQSIZE,
	// RDMA_RQSIZE); 0 means 384. RecvQueue is also the credit window the
	// peer gets.
	SendQueue, RecvQueue int
	// Inline is the largest write sent inline (RDMA_INLINE); 0 means 64,
	// negative means none.
	Inline int
	// SendBuffer is the send ring's size and RecvBuffer the receive
	// ring's, which the peer fills in halves; 0 means 128 KiB. rsocket's
	// SO_SNDBUF and SO_RCVBUF take half of these (rstream's 512 KiB
	// gives 1 MiB rings).
	SendBuffer, RecvBuffer int
	// IOMapSize is how many mappings the peer may make into this side
	// (RDMA_IOMAPSIZE; at most MaxIOMapSize): the peer's IOMap (riomap)
	// needs a free one. 0 means none, rsocket's default.
	IOMapSize int
	// Keepalive, if positive, sends an empty RDMA WRITE every period
	// (SO_KEEPALIVE with TCP_KEEPIDLE; rsocket's service thread sends one
	// each keepalive_time whether the connection is idle or not,
	// librdmacm/rsocket.c:4659-4701), so that a peer that vanished
	// without a word surfaces: the write is never acknowledged and fails
	// after the RC retries, and a blocked Read or Write returns EIO (on
	// rxe, measured with a 1 s period: 15.6 s on 6.1, 5.2 s on 6.12). rsocket's rrecv returns 0
	// there, an end of stream (rs_conn_have_rdata, rsocket.c:2454);
	// Read reports the error instead, io.EOF being kept for the peer's
	// shutdown.
	Keepalive time.Duration
	// PollTime is how long a Read or Write that cannot go on keeps
	// polling the completion queue, on its goroutine, before it arms the
	// queue and parks (rsocket's polling_time, /etc/rdma/rsocket/
	// polling_time): a reply that comes within it is taken without a
	// wake-up through the kernel and the scheduler, at the price of that
	// much CPU time per wait. 0 means DefaultPollTime, negative none.
	PollTime time.Duration
	// ThreadWait makes a Read or Write that parks block its OS thread in
	// epoll_pwait2(2) on the completion channel, as C's blocking rsocket
	// calls block theirs in read(2), instead of parking in the Go
	// runtime's poller: the wake-up is then the kernel's alone, with no
	// pass through the scheduler and no idle P waking the runtime's
	// monitor thread (see wait.go for what it saves), at the price of an
	// OS thread per parked call. For a few busy connections; the default
	// suits many.
	ThreadWait bool
	// ResolveTimeout bounds address and route resolution; 0 means 2 s.
	ResolveTimeout time.Duration
	// Backlog is Listen's backlog; 0 means the kernel's maximum.
	Backlog int
}

// sizes is Options with the defaults filled in and the limits applied.
type sizes struct {
	sq, rq     int
	inline     int
	sbuf, rbuf int
	iomap      int
	poll       time.Duration
	thread     bool
}

func (o *Options) sizes() (sizes, error) {
	s := sizes{sq: o.SendQueue, rq: o.RecvQueue, inline: o.Inline, sbuf: o.SendBuffer, rbuf: o.RecvBuffer, iomap: o.IOMapSize, poll: o.PollTime, thread: o.ThreadWait}
	if s.iomap < 0 || s.iomap > MaxIOMapSize {
		return s, fmt.Errorf("rsocket: iomap size %d outside [0, %d]: %w", s.iomap, MaxIOMapSize, unix.EINVAL)
	}
	if s.sq == 0 {
		s.sq = DefaultQueueSize
	}
	if s.rq == 0 {
		s.rq = DefaultQueueSize
	}
	if s.inline == 0 {
		s.inline = DefaultInline
	}
	if s.inline < 0 {
		s.inline = 0
	}
	if s.poll == 0 {
		s.poll = DefaultPollTime
	}
	if s.sbuf == 0 {
		s.sbuf = DefaultBufferSize
	}
	if s.rbuf == 0 {
		s.rbuf = DefaultBufferSize
	}
	s.sq = min(max(s.sq, minQueueSize), maxQueueSize)
	s.rq = min(max(s.rq, minQueueSize), maxQueueSize)
	if s.sbuf < minBuffer || s.sbuf > maxBuffer || s.rbuf < minBuffer || s.rbuf > maxBuffer {
		return s, fmt.Errorf("rsocket: buffer sizes %d/%d outside [%d, %d]: %w", s.sbuf, s.rbuf, minBuffer, maxBuffer, unix.EINVAL)
	}
	// The ring is advertised in two equal halves.
	s.rbuf &^= 1
	if s.inline > 1024 {
		return s, fmt.Errorf("rsocket: inline size %d above 1024: %w", s.inline, unix.EINVAL)
	}
	return s, nil
}
