package cq_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Wait for completions with a channel instead of spinning: arm, block in
// GetEvent (bounded by a context), acknowledge, re-arm, then drain the
// queue. Needs an rdma_rxe device, and something posting work to QPs on
// the CQ, so it has no checked output.
func ExampleChannel_GetEvent() {
	d, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := uverbs.Open(d)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	ch, err := cq.NewChannel(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	c, err := cq.New(ctx, 256, ch)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if err := c.ReqNotify(false); err != nil {
		log.Fatal(err)
	}
	wait, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	wcs := make([]cq.WC, 16)
	for {
		ev, err := ch.GetEvent(wait)
		if err != nil {
			fmt.Println("no more events:", err)
			return
		}
		ev.Ack(1)
		if err := ev.ReqNotify(false); err != nil {
			log.Fatal(err)
		}
		for {
			n, err := ev.Poll(wcs)
			if err != nil {
				log.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, wc := range wcs[:n] {
				fmt.Printf("wr %d: %v %v, %d bytes\n", wc.WRID, wc.Opcode, wc.Status, wc.ByteLen)
			}
		}
	}
}
