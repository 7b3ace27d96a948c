package server_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"github.com/pureverbs/pureverbs/server"
)

// A server on rxe0 fed by any pingpong-style sender through the side
// channel; frames are handled on the receive thread.
func ExampleNew() {
	cfg := server.DefaultConfig("rxe0")
	cfg.Handler = func(f server.Frame) {
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
