package cqsource_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/netpoll"
	"github.com/pureverbs/pureverbs/netpoll/cqsource"
)

// ignoreSockets is a Handler for a driver that polls only completion queues.
type ignoreSockets struct{}

func (ignoreSockets) OnData(netpoll.ConnID, []byte, netip.AddrPort)       {}
func (ignoreSockets) OnClosed(netpoll.ConnID, netpoll.CloseReason, error) {}

// A completion queue in a Park loop: polled from memory while completions
// flow, armed and parked on its channel when they stop. It needs an rxe
// device, so it has no output to check here; integration/netpoll_test.go
// runs the same in the VM.
func Example() {
	var c *cq.CQ // from cq.New(ctx, cqe, channel): a CQ with a channel of its own
	src, err := cqsource.New(c, make([]cq.WC, 16), func(wcs []cq.WC) {
		for _, wc := range wcs {
			fmt.Println(wc.WRID, wc.Status)
		}
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := netpoll.New(netpoll.Config{Backend: netpoll.Park}, ignoreSockets{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	if _, err := d.AddCQ(src); err != nil {
		fmt.Println(err)
		return
	}
	if err := d.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
}
