package rdmacm_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// A server on rxe0 (10.99.0.1) and a client leaving from rxe1 (10.99.0.2):
// the server looks at the request's private data (two-phase accept),
// accepts with its own and a receive posted in Setup, and the client's
// first SEND lands in it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7471", rdmacm.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	done := make(chan error, 1)
	go func() { done <- serve(ctx, l) }()

	var buf *uverbs.Buffer
	var mr *uverbs.MR
	c, err := rdmacm.Dial(ctx, "10.99.0.1:7471", rdmacm.Options{
		Source:      netip.MustParseAddr("10.99.0.2"),
		PrivateData: []byte("hello"),
		Setup: func(c *rdmacm.Conn) error { // QP in INIT: register memory here
			var err error
			if buf, err = uverbs.NewBuffer(4096, uverbs.BufferOptions{}); err != nil {
				return err
			}
			if mr, err = c.PD().RegisterMR(buf, uverbs.AccessLocalWrite); err != nil {
				buf.Close()
			}
			return err
		},
		Teardown: func(*rdmacm.Conn) error { // the connect failed after Setup: before the PD goes
			return errors.Join(mr.Close(), buf.Close())
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	defer c.Close() // disconnects, then the QP, CQ and PD go
	defer mr.Close()
	fmt.Printf("server said %q\n", c.PrivateData()[:7])
	copy(buf.Bytes(), "ping")
	sge, _ := mr.SGE(0, 4)
	if err := c.QP().PostSend([]qp.SendWR{{ID: 1, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge}}}); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// request from 10.99.0.2 with "hello"
	// server said "welcome"
	// received "ping"
}

// serve takes one request, accepts it with a receive posted, and waits for
// the client's message.
func serve(ctx context.Context, l *rdmacm.Listener) error {
	r, err := l.Request(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("request from %v with %q\n", r.RemoteAddr().Addr(), r.PrivateData()[:5])
	buf, err := uverbs.NewBuffer(4096, uverbs.BufferOptions{})
	if err != nil {
		r.Reject([]byte("no memory"))
		return err
	}
	defer buf.Close()
	var mr *uverbs.MR
	c, err := r.Accept(ctx, rdmacm.Options{PrivateData: []byte("welcome"), Setup: func(c *rdmacm.Conn) error {
		var err error
		if mr, err = c.PD().RegisterMR(buf, uverbs.AccessLocalWrite); err != nil {
			return err
		}
		sge, _ := mr.SGE(0, 4096)
		if err = c.QP().PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{sge}}}); err != nil {
			mr.Close() // a failing Setup undoes itself
		}
		return err
	}, Teardown: func(*rdmacm.Conn) error { return mr.Close() }})
	if err != nil {
		return err
	}
	defer c.Close()
	defer mr.Close()
	wc := make([]cq.WC, 1)
	for {
		n, err := c.CQ().Poll(wc)
		if err != nil {
			return err
		}
		if n == 1 {
			fmt.Printf("received %q\n", buf.Bytes()[:wc[0].ByteLen])
			return nil
		}
	}
}

// The two-phase dial, for clients that build their own queue pairs (as
// rping -q and perftest -q N -R do): Resolve each connection's route, build
// the QPs on the Route's device context (here two QPs sharing a PD and a
// CQ: routes to one device share one context), and ConnectQP each.
func ExampleResolve() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "10.99.0.1:7472", rdmacm.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *rdmacm.Conn, 2)
	go func() {
		defer close(accepted)
		for range 2 {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	var routes []*rdmacm.Route
	for range 2 {
		rt, err := rdmacm.Resolve(ctx, "10.99.0.1:7472", rdmacm.Options{Source: netip.MustParseAddr("10.99.0.2")})
		if err != nil {
			log.Fatal(err)
		}
		defer rt.Close() // a no-op once connected
		routes = append(routes, rt)
	}
	dev := routes[0].Context()
	fmt.Println("one context:", routes[1].Context() == dev)
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	shared, err := cq.New(dev, 64, nil)
	if err != nil {
		log.Fatal(err)
	}
	var qps []*qp.QP
	var conns []*rdmacm.Conn
	for i, rt := range routes {
		q, err := qp.New(pd, qp.Spec{Type: qp.RC, SendCQ: shared, RecvCQ: shared,
			Cap: qp.Cap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		qps = append(qps, q)
		c, err := rt.ConnectQP(ctx, q, rdmacm.Options{PrivateData: []byte{byte('A' + i)}})
		if err != nil {
			log.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Println("QP", i, q.State())
	}
	for c := range accepted {
		fmt.Printf("accepted %q\n", c.PrivateData()[:1])
		c.Close()
	}
	// What is the caller's goes after the disconnect and before the
	// Conn's Close, which may close the device context.
	for _, c := range conns {
		c.Disconnect()
	}
	for _, q := range qps {
		q.Close()
	}
	shared.Close()
	pd.Close()
	for _, c := range conns {
		c.Close()
	}
	// Output:
	// one context: true
	// QP 0 RTS
	// QP 1 RTS
	// accepted "A"
	// accepted "B"
}

// A UD QP of the caller's own on the active side (ResolveUD, then
// Route.ConnectQP): the SIDR reply gives the server's QPN, its Q_Key and
// an address handle, made in the QP's PD, and the first datagram lands in
// the receive the server posted in Setup.
func ExampleResolveUD() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rbuf *uverbs.Buffer
	var rmr *uverbs.MR
	l, err := rdmacm.ListenUD(ctx, "10.99.0.1:7473", rdmacm.Options{Setup: func(c *rdmacm.Conn) error {
		var err error
		if rbuf, err = uverbs.NewBuffer(4096, uverbs.BufferOptions{}); err != nil {
			return err
		}
		if rmr, err = c.PD().RegisterMR(rbuf, uverbs.AccessLocalWrite); err != nil {
			return err
		}
		sge, _ := rmr.SGE(0, qp.GRHLen+64) // a UD receive starts with the GRH
		return c.QP().PostRecv([]qp.RecvWR{{SGEs: []uverbs.SGE{sge}}})
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *rdmacm.Conn, 1)
	go func() {
		defer close(accepted)
		if c, err := l.Accept(ctx); err == nil {
			accepted <- c
		}
	}()

	rt, err := rdmacm.ResolveUD(ctx, "10.99.0.1:7473", rdmacm.Options{Source: netip.MustParseAddr("10.99.0.2")})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close() // a no-op once connected
	dev := rt.Context()
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	scq, err := cq.New(dev, 16, nil)
	if err != nil {
		log.Fatal(err)
	}
	q, err := qp.New(pd, qp.Spec{Type: qp.UD, SendCQ: scq, RecvCQ: scq})
	if err != nil {
		log.Fatal(err)
	}
	c, err := rt.ConnectQP(ctx, q, rdmacm.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv, ok := <-accepted
	if !ok {
		log.Fatal("accept failed")
	}
	r := c.Remote()
	fmt.Println("server's QPN from the SIDR reply:", r.QPN == srv.QP().Num())

	buf, err := uverbs.NewBuffer(4096, uverbs.BufferOptions{})
	if err != nil {
		log.Fatal(err)
	}
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	copy(buf.Bytes(), "datagram")
	sge, _ := mr.SGE(0, 8)
	if err := q.PostSend([]qp.SendWR{{ID: 1, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge},
		AH: r.AH, RemoteQPN: r.QPN, RemoteQKey: r.QKey}}); err != nil {
		log.Fatal(err)
	}
	var wc [1]cq.WC
	for _, on := range []*cq.CQ{srv.CQ(), scq} {
		for n := 0; n == 0; {
			if n, err = on.Poll(wc[:]); err != nil {
				log.Fatal(err)
			}
		}
		if wc[0].Status != cq.Success {
			log.Fatal(wc[0].Status)
		}
		if on == srv.CQ() {
			d, _ := qp.ParseDatagram(&wc[0], rbuf.Bytes())
			fmt.Printf("received %q from the client's QP: %v\n", d.Payload, d.SrcQP == q.Num())
		}
	}
	// The Conn's address handle is in pd: the Conn closes before it.
	mr.Close()
	q.Close()
	scq.Close()
	c.Close()
	pd.Close()
	buf.Close()
	rmr.Close()
	srv.Close()
	rbuf.Close()
	// Output:
	// server's QPN from the SIDR reply: true
	// received "datagram" from the client's QP: true
}

// A refused connect is a *RejectError: the reason, the peer's private
// data, and errors.Is matches ECONNREFUSED.
func ExampleRejectError() {
	var err error = &rdmacm.RejectError{Addr: "10.99.0.1:7174", Reason: rdmacm.RejectNoListener}
	var re *rdmacm.RejectError
	if errors.As(err, &re) {
		fmt.Println(re.Reason == rdmacm.RejectNoListener, errors.Is(err, unix.ECONNREFUSED))
	}
	fmt.Println(err)
	// Output:
	// true true
	// rdmacm: connect to 10.99.0.1:7174 rejected: reason 8 (no listener on that port)
}
