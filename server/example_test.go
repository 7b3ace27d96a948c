package server_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/uverbs"
)

// A server on rxe0 fed by any pingpong-style sender through the side
// channel; frames are handled on the receive thread.
func ExampleNew() {
	cfg := server.DefaultConfig("rxe0")
	cfg.Handler = func(f *server.Frame) {
		fmt.Println(f.Channel(), f.Position(), len(f.Data()))
		f.Release()
	}
	srv, err := server.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", ":18515")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(context.Background(), ln, server.ServeOptions{WatchPeer: true}))
}

// The side channel's record: rdma-core's pingpong exchange format.
func ExamplePeer_MarshalText() {
	p := server.Peer{QPN: 0x11, PSN: 0x3a5f1c, GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}}
	b, _ := p.MarshalText()
	fmt.Println(string(b))
	var q server.Peer
	if err := q.UnmarshalText([]byte("0000:000012:00abcd:00000000000000000000ffff0a630002")); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("QPN %#x PSN %#x GID %v\n", q.QPN, q.PSN, q.GID)
	// Output:
	// 0000:000011:3a5f1c:00000000000000000000ffff0a630001
	// QPN 0x12 PSN 0xabcd GID ::ffff:10.99.0.2
}
