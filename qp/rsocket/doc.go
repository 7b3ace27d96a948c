// Package rsocket is a byte stream over RDMA that speaks librdmacm's
// rsocket protocol, so that it interoperates with librdmacm's rsocket programs
// (rstream and riostream are tested) in both directions. Conn is a
// net.Conn and Listener a net.Listener: code written for TCP moves to RDMA
// by changing its dialer and listener.
//
//	l, err := rsocket.Listen(ctx, "10.99.0.1:7471", rsocket.Options{})
//	c, err := l.Accept()
//
//	c, err := rsocket.Dial(ctx, "10.99.0.1:7471", rsocket.Options{Source: netip.MustParseAddr("10.99.0.2")})
//
// # The protocol
//
// A connection is an RC queue pair connected by the RDMA CM in its TCP
// port space; the connect request and reply carry each side's 40-byte
// connect data: the protocol version, its receive queue size (the message
// credits it grants), where its two-entry target list is, and the first
// half of its receive ring. Data goes by RDMA WRITE_WITH_IMM into the
// peer's ring, the 32-bit immediate saying how many bytes (operation 0).
// A receiver hands out ring halves, once read, by writing a buffer
// descriptor into the sender's target list with an SGL message (operation
// 4), which also renews the sender's message credits; shutdown and
// disconnect are control messages (operation 7). Every message uses one
// receive at the peer, posted without buffers.
//
// The iomap extension (riomap, riowrite, riounmap) is Conn.IOMap,
// Conn.IOWrite and Conn.IOUnmap, with Options.IOMapSize giving the peer
// room for its mappings: riostream interoperates with it. A peer that
// vanishes without a word (no disconnect message, no CM event) is noticed
// only with Options.Keepalive, as in rsocket.
//
// The wire is the same in rdma-core 44 (Debian 12) and 56 (Debian 13): the
// interop tests pass against both.
//
// # Progress
//
// No goroutine moves data: a Read or Write that cannot go on processes the
// completion queue itself, polls it for Options.PollTime (rsocket's
// polling_time, 10 us by default) and, when nothing has come, arms it and
// waits for the completion channel, parked in Go's runtime poller
// (fdwait's Netpoll mode), so that many connections need few OS threads;
// with Options.ThreadWait, blocked on its OS thread, as C's blocking
// rsocket calls are, which wakes faster.
// Deadlines and Close wake such a wait. One goroutine per connection,
// parked the same way, watches the RDMA CM for a peer that disappears
// without a disconnect message.
//
// Measured against librdmacm's rstream (tools/rstream as client, the C
// tool as server, against C at both ends, interleaved, three rounds on a
// quiet host; the VM's rxe on 6.1 under TCG; both tools polling, as the C
// tool's non-blocking calls do): a 64-byte round trip took 53-67 us (C
// 45-50), a 64 KiB transfer of a bandwidth run 2.90-3.09 ms (C
// 2.73-2.90), a 4 KiB one 0.71-0.80 ms (C 0.57-0.59). Most of it is the
// send doorbell's system call, in which rxe carries the data; Go makes as
// many as C (strace -c). Under load from other VMs, runs swing tenfold.
package rsocket
