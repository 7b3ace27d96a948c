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
			mr, err = c.PD().RegisterMR(buf, uverbs.AccessLocalWrite)
			return err
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
		return c.QP().PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{sge}}})
	}})
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
