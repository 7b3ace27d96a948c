package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/uverbs"
)

// A server on rxe0 takes a sender through the side channel (Serve) and
// hands each SEND_WITH_IMM to its Handler as a Frame: the channel and ring
// position from the immediate, the payload in place in the slab. The
// sender here, on rxe1, is what rocev2-send or an FPGA's host software
// does: a QP of its own, rdma-core's pingpong record traded over TCP, then
// SENDs with the channel in bits 7..0 and the ring position in bits 31..8
// of the immediate. It runs in rxevm's VM (rxe0 on 10.99.0.1, rxe1 on
// 10.99.0.2) and is skipped on a host without rxe1.
func ExampleServer_Serve() {
	got := make(chan struct{}, 3)
	cfg := server.DefaultConfig("rxe0")
	cfg.Handler = func(f server.Frame) { // on the receive thread
		fmt.Printf("channel %d, position %d: %q\n", f.Channel(), f.Position(), f.Data())
		f.Release() // the slot goes back to the receive queue
		got <- struct{}{}
	}
	srv, err := server.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close() // Serve returns server.ErrClosed
	ln, err := net.Listen("tcp", "10.99.0.1:18515")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(context.Background(), ln, server.ServeOptions{})

	if err := send(ln.Addr().String(), "rxe1", "veth1", []string{"first", "second", "third"}); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			log.Fatal("a frame did not arrive")
		}
	}
	// Output:
	// channel 1, position 0: "first"
	// channel 1, position 1: "second"
	// channel 1, position 2: "third"
}

// send plays the sender: it connects an RC QP on device (GID of netdev) to
// the server at addr through the side channel and sends each payload on
// channel 1, waiting for every send's completion.
func send(addr, device, netdev string, payloads []string) error {
	dev, err := uverbs.DeviceByName(device)
	if err != nil {
		return err
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		return err
	}
	defer ctx.Close()
	port, err := ctx.QueryPort(1)
	if err != nil {
		return err
	}
	gid, err := ctx.NetdevGID(1, netdev)
	if err != nil {
		return err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return err
	}
	defer pd.Close()
	buf, err := uverbs.NewBuffer(4096, uverbs.BufferOptions{})
	if err != nil {
		return err
	}
	defer buf.Close()
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	defer mr.Close()
	c, err := cq.New(ctx, 16, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	q, err := qp.New(pd, qp.Spec{Type: qp.RC, SendCQ: c, RecvCQ: c})
	if err != nil {
		return err
	}
	defer q.Close()

	// The side channel: our record, the server's record, "done".
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	me := qp.Peer{QPN: q.Num(), PSN: 0x1234, GID: gid.GID}
	rec, _ := me.MarshalText()
	if _, err := conn.Write(append(rec, 0)); err != nil {
		return err
	}
	theirs := make([]byte, qp.PeerRecordLen)
	if _, err := io.ReadFull(conn, theirs); err != nil {
		return err
	}
	var peer qp.Peer
	if err := peer.UnmarshalText(theirs); err != nil {
		return err
	}
	if err := q.Connect(peer, qp.ConnectOptions{SGID: gid, PathMTU: port.ActiveMTU, SendPSN: me.PSN}); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("done\x00")); err != nil {
		return err
	}

	wrs := make([]qp.SendWR, len(payloads))
	off := 0
	for i, p := range payloads {
		copy(buf.Bytes()[off:], p)
		sge, err := mr.SGE(off, len(p))
		if err != nil {
			return err
		}
		const channel = 1
		wrs[i] = qp.SendWR{ID: uint64(i), Opcode: qp.SendWithImm, Flags: qp.Signaled,
			Imm: uint32(i)<<8 | channel, SGEs: []uverbs.SGE{sge}}
		off += len(p)
	}
	if err := q.PostSend(wrs); err != nil {
		return err
	}
	wc := make([]cq.WC, len(wrs))
	for n, deadline := 0, time.Now().Add(10*time.Second); n < len(wrs); {
		k, err := c.Poll(wc[n:])
		if err != nil {
			return err
		}
		for _, w := range wc[n : n+k] {
			if w.Status != cq.Success {
				return fmt.Errorf("send %d: %v", w.WRID, w.Status)
			}
		}
		if n += k; k == 0 && time.Now().After(deadline) {
			return fmt.Errorf("%d of %d sends completed", n, len(wrs))
		}
	}
	return nil
}
