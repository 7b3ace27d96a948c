//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/netpoll"
	"golang.org/x/sys/unix"
)

// result is one run's measurements, over the round trips after warm-up.
type result struct {
	name     string
	rtts     []time.Duration
	elapsed  time.Duration
	cpu      time.Duration
	allocs   uint64
	resent   uint64
	timedOut bool
	passes   uint64 // both drivers' loop passes
	parks    uint64 // both drivers' sleeps
}

// snapshot is the process state at the start or end of the measured part.
type snapshot struct {
	at     time.Time
	cpu    time.Duration
	allocs uint64
}

// allocSample reads the heap allocation count without stopping the world.
var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}

func takeSnapshot() snapshot {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	metrics.Read(allocSample)
	return snapshot{
		at:     time.Now(),
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		allocs: allocSample[0].Value.Uint64(),
	}
}

// pinger is the client's side of the protocol, shared by every run: a ping
// carries its sequence number and send time; the pong for the expected
// sequence number is timed and the next ping goes out.
type pinger struct {
	base   time.Time
	warmup uint64
	total  uint64
	next   atomic.Uint64 // the sequence number whose pong is awaited
	rtts   []time.Duration
	start  snapshot
	end    snapshot
	done   chan struct{}
	resent atomic.Uint64
}

func newPinger(o options) *pinger {
	return &pinger{
		base:   time.Now(),
		warmup: uint64(o.warmup),
		total:  uint64(o.warmup + o.n),
		rtts:   make([]time.Duration, 0, o.n),
		done:   make(chan struct{}),
	}
}

// fill writes ping seq into p.
func (c *pinger) fill(p []byte, seq uint64) {
	binary.LittleEndian.PutUint64(p[0:], seq)
	binary.LittleEndian.PutUint64(p[8:], uint64(time.Since(c.base)))
}

// pong handles one reply and reports the next sequence number to ping, or
// false when there is nothing to send (a stale duplicate, or the end).
func (c *pinger) pong(p []byte) (uint64, bool) {
	if len(p) < 16 {
		return 0, false
	}
	seq := binary.LittleEndian.Uint64(p)
	if seq != c.next.Load() {
		return 0, false // a duplicate after a resend
	}
	if seq >= c.warmup {
		sent := time.Duration(binary.LittleEndian.Uint64(p[8:]))
		c.rtts = append(c.rtts, time.Since(c.base)-sent)
	}
	seq++
	switch seq {
	case c.warmup:
		c.start = takeSnapshot()
	case c.total:
		c.end = takeSnapshot()
		c.next.Store(seq)
		close(c.done)
		return 0, false
	}
	c.next.Store(seq)
	return seq, true
}

// watch resends the awaited ping through send whenever no pong arrived for
// stall, until the run is done or ctx ends.
func (c *pinger) watch(ctx context.Context, stall time.Duration, size int, send func([]byte)) {
	buf := make([]byte, size)
	t := time.NewTicker(stall)
	defer t.Stop()
	last := c.next.Load()
	for {
		select {
		case <-c.done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cur := c.next.Load(); cur == last && cur < c.total {
			c.fill(buf, cur)
			send(buf)
			c.resent.Add(1)
		} else {
			last = cur
		}
	}
}

// wait waits for the run to finish or time out.
func (c *pinger) wait(o options, r *result) {
	select {
	case <-c.done:
	case <-time.After(o.timeout):
		r.timedOut = true
	}
}

// finish turns the pinger's records into r; call after the loops stopped.
func (c *pinger) finish(r *result) {
	r.rtts = c.rtts
	r.resent = c.resent.Load()
	if !r.timedOut {
		r.elapsed = c.end.at.Sub(c.start.at)
		r.cpu = c.end.cpu - c.start.cpu
		r.allocs = c.end.allocs - c.start.allocs
	}
}

// echo is the server's handler: every datagram goes back to its sender.
type echo struct{ d *netpoll.Driver }

func (e *echo) OnData(id netpoll.ConnID, p []byte, from netip.AddrPort) {
	e.d.SendTo(id, p, from)
}

func (e *echo) OnClosed(netpoll.ConnID, netpoll.CloseReason, error) {}

// clientHandler answers each pong with the next ping.
type clientHandler struct {
	c   *pinger
	d   *netpoll.Driver
	id  netpoll.ConnID
	buf []byte
}

func (h *clientHandler) OnData(_ netpoll.ConnID, p []byte, _ netip.AddrPort) {
	if seq, ok := h.c.pong(p); ok {
		h.c.fill(h.buf, seq)
		h.d.Send(h.id, h.buf)
	}
}

func (h *clientHandler) OnClosed(netpoll.ConnID, netpoll.CloseReason, error) {}

// sockets opens the server socket (in the server's namespace) and the
// client socket connected to it (in the client's).
func sockets(topo topology, port uint16) (srv, cli *net.UDPConn, err error) {
	addr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(topo.addr, port))
	if err := topo.server(func() (err error) { srv, err = net.ListenUDP("udp4", addr); return err }); err != nil {
		return nil, nil, err
	}
	if err := topo.client(func() (err error) { cli, err = net.DialUDP("udp4", nil, addr); return err }); err != nil {
		srv.Close()
		return nil, nil, err
	}
	return srv, cli, nil
}

// benchDriver runs the ping-pong with cfg's backend on both ends.
func benchDriver(o options, topo topology, port uint16, cfg netpoll.Config) (result, error) {
	var r result
	srvConn, cliConn, err := sockets(topo, port)
	if err != nil {
		return r, err
	}
	defer srvConn.Close()
	defer cliConn.Close()

	e := &echo{}
	srv, err := netpoll.New(cfg, e)
	if err != nil {
		return r, err
	}
	defer srv.Close()
	e.d = srv
	c := newPinger(o)
	h := &clientHandler{c: c, buf: make([]byte, o.size)}
	cli, err := netpoll.New(cfg, h)
	if err != nil {
		return r, err
	}
	defer cli.Close()
	h.d = cli
	if _, err := srv.AddConn(srvConn); err != nil {
		return r, err
	}
	if h.id, err = cli.AddConn(cliConn); err != nil {
		return r, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, 2)
	srvCPU, cliCPU := o.pin.cpus()
	for i, d := range []*netpoll.Driver{srv, cli} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pinThread([]int{srvCPU, cliCPU}[i]); err != nil {
				errs[i] = err
				cancel()
				return
			}
			errs[i] = d.Run(ctx)
		}()
	}
	go c.watch(ctx, o.stall, o.size, func(p []byte) { cliConn.Write(p) })
	first := make([]byte, o.size)
	c.fill(first, 0)
	cliConn.Write(first)
	c.wait(o, &r)
	cancel()
	wg.Wait()
	c.finish(&r)
	ss, cs := srv.Stats(), cli.Stats()
	r.passes = ss.Passes + cs.Passes
	r.parks = ss.Parks + cs.Parks
	return r, errors.Join(errs...)
}

// benchUDPConn runs the ping-pong through Go's netpoller on both ends.
func benchUDPConn(o options, topo topology, port uint16) (result, error) {
	var r result
	srvConn, cliConn, err := sockets(topo, port)
	if err != nil {
		return r, err
	}
	defer cliConn.Close()
	// Not pinned: these goroutines block in Go's netpoller, and a goroutine
	// locked to a thread pays a thread hand-off on every wake-up (measured:
	// p50 64-93 µs pinned against 7-9 µs, see the README).
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, from, err := srvConn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed
			}
			srvConn.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	defer srvConn.Close()

	c := newPinger(o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.watch(ctx, o.stall, o.size, func(p []byte) { cliConn.Write(p) })
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		ping := make([]byte, o.size)
		buf := make([]byte, 64<<10)
		c.fill(ping, 0)
		cliConn.Write(ping)
		for {
			n, err := cliConn.Read(buf)
			if err != nil {
				return // closed
			}
			if seq, ok := c.pong(buf[:n]); ok {
				c.fill(ping, seq)
				cliConn.Write(ping)
			}
		}
	}()
	c.wait(o, &r)
	cliConn.Close() // stops the reader; then c is ours alone
	<-readerDone
	c.finish(&r)
	return r, nil
}

// us formats a duration in µs with one decimal.
func us(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}
