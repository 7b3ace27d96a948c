package rsocket_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/netip"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
)

// A server that echoes one connection and a client that dials it from
// another RDMA device, as with TCP. (Run it on a host with two rxe devices
// on 10.99.0.1 and 10.99.0.2, as in the rxevm VM.)
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rsocket.Listen(ctx, "10.99.0.1:7471", rsocket.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client's CloseWrite
	}()

	c, err := rsocket.Dial(ctx, "10.99.0.1:7471", rsocket.Options{Source: netip.MustParseAddr("10.99.0.2")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hello over RDMA")); err != nil {
		log.Fatal(err)
	}
	c.CloseWrite()
	reply, err := io.ReadAll(c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", reply)
	// Output: hello over RDMA
}
