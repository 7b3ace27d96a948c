//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
)

// Go dials Go across the veth pair: private data both ways, a SEND each
// way, then the client's Close is the server's DISCONNECTED.
func TestCMGoToGo(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7500", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type result struct {
		c   *rdmacm.Conn
		m   *cmMessages
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := l.Request(ctx)
		if err != nil {
			done <- result{err: err}
			return
		}
		var m *cmMessages
		c, err := r.Accept(ctx, withMessages(t, rdmacm.Options{PrivateData: []byte("server says hi")}, &m, 4, 64))
		if err == nil && !bytes.HasPrefix(r.PrivateData(), []byte("client says hi")) {
			err = fmt.Errorf("request private data %q", r.PrivateData())
		}
		done <- result{c, m, err}
	}()
	var cm *cmMessages
	c, err := rdmacm.Dial(ctx, "10.99.0.1:7500", withMessages(t, rdmacm.Options{Source: cmAddr1, PrivateData: []byte("client says hi")}, &cm, 4, 64))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer s.m.close()
	defer s.c.Close()
	if got := c.PrivateData(); !bytes.HasPrefix(got, []byte("server says hi")) || len(got) != rdmacm.MaxPrivateDataREP {
		t.Errorf("client got REP private data %q (%d bytes), want the server's, full-size %d", got, len(got), rdmacm.MaxPrivateDataREP)
	}
	if c.LocalAddr().Addr() != cmAddr1 || c.RemoteAddr() != netip.MustParseAddrPort("10.99.0.1:7500") {
		t.Errorf("client addresses %v -> %v", c.LocalAddr(), c.RemoteAddr())
	}
	if s.c.RemoteAddr().Addr() != cmAddr1 || s.c.Context().Device().Name == c.Context().Device().Name {
		t.Errorf("server sees %v on %s, client on %s: not across the pair", s.c.RemoteAddr(), s.c.Context().Device().Name, c.Context().Device().Name)
	}
	for _, st := range []*qp.QP{c.QP(), s.c.QP()} {
		if a, err := st.Query(); err != nil || a.State != qp.StateRTS {
			t.Errorf("QP state %v (%v), want RTS", a.State, err)
		}
	}
	copy(cm.buf.Bytes(), "ping from the client")
	cm.postSends(t, c.QP(), 1)
	pollN(t, c.CQ(), 1, 0, 10*time.Second)
	w := pollN(t, s.c.CQ(), 0, 1, 10*time.Second)
	if got := s.m.buf.Bytes()[:w[0].ByteLen]; !bytes.HasPrefix(got, []byte("ping from the client")) {
		t.Errorf("server received %q", got)
	}
	copy(s.m.buf.Bytes(), "pong from the server")
	s.m.postSends(t, s.c.QP(), 1)
	pollN(t, s.c.CQ(), 1, 0, 10*time.Second)
	w = pollN(t, c.CQ(), 0, 1, 10*time.Second)
	if got := cm.buf.Bytes()[:w[0].ByteLen]; !bytes.HasPrefix(got, []byte("pong from the server")) {
		t.Errorf("client received %q", got)
	}
	cm.close() // memory registered on the connection's PD goes first
	if err := c.Close(); err != nil {
		t.Errorf("client close: %v", err)
	}
	ev, err := s.c.WaitEvent(ctx)
	if err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Fatalf("server event %v, %v; want DISCONNECTED", ev.Type, err)
	}
	// The survivor's QP is flushed: its outstanding receives complete.
	if a, err := s.c.QP().Query(); err != nil || a.State != qp.StateError {
		t.Errorf("server QP after DISCONNECTED: %v (%v), want ERR", a.State, err)
	}
}

// ucmatoseServerGo is the Go side of ucmatose's server: n connections on
// one listener, each with count receives posted before the accept; once
// all are up, count sends of size bytes on each, then the receives, then
// disconnect.
func ucmatoseServerGo(t *testing.T, ctx context.Context, l *rdmacm.Listener, n, count, size int) {
	conns := make([]*rdmacm.Conn, n)
	msgs := make([]*cmMessages, n)
	for i := range n {
		c, err := l.Request(ctx)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		conns[i], err = c.Accept(ctx, withMessages(t, rdmacm.Options{Cap: qp.Cap{MaxSendWR: uint32(count), MaxRecvWR: uint32(count)}}, &msgs[i], count, size))
		if err != nil {
			t.Fatalf("accept %d: %v", i, err)
		}
		defer conns[i].Close()
		defer msgs[i].close()
	}
	for i, c := range conns {
		msgs[i].postSends(t, c.QP(), count)
	}
	for _, c := range conns {
		pollN(t, c.CQ(), count, count, 30*time.Second)
	}
	for _, c := range conns {
		if err := c.Disconnect(); err != nil {
			t.Errorf("disconnect: %v", err)
		}
	}
}

// ucmatoseClientGo is the Go side of ucmatose's client.
func ucmatoseClientGo(t *testing.T, ctx context.Context, addr string, n, count, size int) {
	conns := make([]*rdmacm.Conn, n)
	msgs := make([]*cmMessages, n)
	for i := range n {
		conns[i] = dialRetry(t, ctx, addr, withMessages(t, rdmacm.Options{Source: cmAddr1, Cap: qp.Cap{MaxSendWR: uint32(count), MaxRecvWR: uint32(count)}}, &msgs[i], count, size))
		defer conns[i].Close()
		defer msgs[i].close()
	}
	for i, c := range conns {
		pollN(t, c.CQ(), 0, count, 30*time.Second)
		msgs[i].postSends(t, c.QP(), count)
	}
	for _, c := range conns {
		pollN(t, c.CQ(), count, 0, 30*time.Second)
	}
	for i, c := range conns {
		ev, err := c.WaitEvent(ctx)
		if err != nil || ev.Type != rdmacm.EventDisconnected {
			t.Fatalf("connection %d: event %v, %v; want DISCONNECTED", i, ev.Type, err)
		}
	}
}

// ucmatose (rdma-core's C tool) against the Go library, both ways: 8
// connections on one listener, 100 messages of 1024 bytes each way on
// each; once more with the C server migrating its ids to a new event
// channel (-m).
func TestCMUcmatose(t *testing.T) {
	devices(t, 2)
	const n, count, size = 8, 100, 1024
	args := []string{"-c", strconv.Itoa(n), "-C", strconv.Itoa(count), "-S", strconv.Itoa(size)}
	for _, migrate := range []bool{false, true} {
		name := "CServer"
		if migrate {
			name += "Migrate"
		}
		t.Run(name, func(t *testing.T) {
			port := "7510"
			a := append([]string{"-b", "10.99.0.1", "-p", port}, args...)
			if migrate {
				port = "7511"
				a = append([]string{"-b", "10.99.0.1", "-p", port, "-m"}, args...)
			}
			srv := startPeer(t, 90*time.Second, "ucmatose", a...)
			ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
			defer cancel()
			ucmatoseClientGo(t, ctx, "10.99.0.1:"+port, n, count, size)
			out := srv.wait(t)
			if !strings.Contains(out, "data transfers complete") || !strings.Contains(out, "disconnected") ||
				(migrate && !strings.Contains(out, "migrating to new event channel")) {
				t.Errorf("ucmatose server:\n%s", out)
			}
		})
	}
	t.Run("CClient", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
		defer cancel()
		l, err := rdmacm.Listen(ctx, "10.99.0.1:7512", rdmacm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cli := startPeer(t, 90*time.Second, "ucmatose", append([]string{"-s", "10.99.0.1", "-b", "10.99.0.2", "-p", "7512"}, args...)...)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-cli.done
		}()
		ucmatoseServerGo(t, ctx, l, n, count, size)
		out := cli.wait(t)
		if !strings.Contains(out, "data transfers complete") {
			t.Errorf("ucmatose client:\n%s", out)
		}
		wg.Wait()
	})
}

// Each connection has its own event channel: with connection A's
// DISCONNECTED left unread, B's WaitEvent returns B's own DISCONNECTED;
// and closing A with its event still unread returns at once (nothing
// waits for an acknowledgement).
func TestCMPerConnectionEvents(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7513", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *rdmacm.Conn, 2)
	go func() {
		for range 2 {
			c, err := l.Accept(ctx)
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var clients, servers [2]*rdmacm.Conn
	for i := range clients {
		if clients[i], err = rdmacm.Dial(ctx, "10.99.0.1:7513", rdmacm.Options{Source: cmAddr1}); err != nil {
			t.Fatal(err)
		}
		defer clients[i].Close()
		if servers[i] = <-accepted; servers[i] == nil {
			t.Fatal("accept failed")
		}
		defer servers[i].Close()
	}
	byPort := map[uint16]*rdmacm.Conn{}
	for _, s := range servers {
		byPort[s.RemoteAddr().Port()] = s
	}
	a, b := byPort[clients[0].LocalAddr().Port()], byPort[clients[1].LocalAddr().Port()]
	if a == nil || b == nil {
		t.Fatalf("server sides by client port: %v", byPort)
	}
	clients[0].Close()
	time.Sleep(500 * time.Millisecond) // A's DISCONNECTED is queued, unread
	clients[1].Close()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	ev, err := b.WaitEvent(wctx)
	if err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Fatalf("B: %v, %v; want its DISCONNECTED", ev.Type, err)
	}
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Errorf("closing A with an unread event: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("closing A with an unread event took %v", took)
	}
}
