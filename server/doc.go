// Package server is a RoCE v2 frame receiver: it takes the RDMA SEND_WITH_IMM
// stream of one sender on one RC queue pair and hands every message
// downstream as a Frame, without copying it, in the way rogue's rocev2
// Server does.
//
// A Server owns one receive slab in memory the Go heap never sees, cut into
// Config.Depth slots of Config.MaxPayload bytes and registered once. Every
// slot is in exactly one place: posted in the receive queue, or held (in a
// Frame downstream, or on its way back). A message lands in a slot; its
// immediate names the sender's channel (bits 7..0) and ring position (bits
// 31..8): one free-running position for all channels by default, as surf's
// RoCEv2 dispatcher stamps it (Config.Ring, Config.RingSize; Stats.Ring
// counts gaps, duplicates and wraps; RingCounts says which wrap is
// ambiguous while RingSize is unknown). No payload format is assumed. The
// Frame (a value naming one delivery of the slot) aliases the slot until
// Frame.Release gives it back, from any goroutine, and the receive loop
// re-posts it; a Release of a stale Frame does nothing. While every slot
// is held the sender is throttled by RNR NAKs and nothing is lost.
//
// ExampleServer_Serve runs a server and a sender (what rocev2-send or an
// FPGA's host software does) in rxevm's VM, its output checked.
//
// For an FPGA behind surf's RoCEv2 engine: Config.Ring stays RingShared
// (its dispatcher keeps one ring position for all channels), RingSize is
// the AddrWrapCount programmed into the FPGA (usually Depth), nothing is
// assumed about payloads, and IdleTimeout stays 0 if the FPGA pauses
// between runs.
//
// A connection is made either by hand (SetPeerGID, then CompleteConnection
// with the sender's QP number and PSN) or by Serve, a TCP side channel that
// trades the record rdma-core's pingpong examples exchange (LID:QPN:PSN:GID),
// as tools/rocev2-send does; each new sender there replaces the previous one
// on a fresh QP, once its exchange completed, while the slab and its
// region stay. Exchanges run concurrently, bounded in number and time, so
// strangers on the port cost the live stream nothing. ServeCM is the other
// way in, beside it: a plain librdmacm RC connect to an rdmacm listener on
// the server's own address (CMAddr), accepted on a QP of the server's;
// its accepts are bounded in number and time the same way (a requester
// that never sends its RTU is evicted or times out), and both take the
// same allow-list. Close ends both, and what they run, before it releases
// the device.
//
// The receive loop runs on its own goroutine: it polls the completion queue,
// spins for Config.SpinBudget when the queue is empty, then arms it and
// sleeps until a completion event or a Release wakes it. Its steady state
// allocates nothing. A completion that is not a good receive — an error
// status, another opcode, a length of zero or more than a slot — is counted
// in Stats and its slot re-posted; one whose work request ID names no
// receive a slot has now (repeated, stale or foreign) is counted and
// dropped. No bad completion is delivered, and no slot is posted twice. When the
// QP goes to the error state (the sender broke the connection, or a newer
// one took over) the loop ends with ErrFlushed; with Config.IdleTimeout a
// connection that receives nothing that long ends with ErrIdle.
//
// The Handler may call Close (it returns at once; the teardown follows
// when the Handler returns); a panic in it is recovered, counted and its
// frame released, or, with Config.PanicStops, stops the server.
//
// Close stops the loop and releases the device objects; Frames still held
// stay valid, and the slab is unmapped by the last Release.
package server
