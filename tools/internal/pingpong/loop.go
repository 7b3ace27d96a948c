package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/tools/internal/eventlook"
)

// Loop runs the ping-pong p over one CQ until it is finished. With a
// channel (events mode) each round waits for a completion event, re-arms
// the CQ, then polls once; without one it spins on the CQ. wc is the poll
// batch (the C tools poll two at a time). It returns the number of events
// taken, all of them to be acknowledged. It allocates nothing per round.
func Loop(c *cq.CQ, ch *cq.Channel, p *Pingpong, wc []cq.WC) (events int, err error) {
	// While a send is outstanding its completion is likely queued already
	// (see package eventlook); the peer's answer comes while the loop
	// sleeps, and GetEvent's own look takes care of those waits.
	var sendLook eventlook.Look
	for !p.Finished() {
		if ch != nil {
			var got *cq.CQ
			if p.pending&SendWRID != 0 {
				got = sendLook.Queued(ch)
			}
			if got == nil {
				if got, err = ch.GetEvent(context.Background()); err != nil {
					return events, fmt.Errorf("Failed to get cq_event: %w", err)
				}
			}
			events++
			if got != c {
				return events, errors.New("CQ event for unknown CQ")
			}
			if err := c.ReqNotify(false); err != nil {
				return events, fmt.Errorf("Couldn't request CQ notification: %w", err)
			}
		}
		var n int
		for {
			if n, err = c.Poll(wc); err != nil {
				return events, fmt.Errorf("poll CQ failed: %w", err)
			}
			if n > 0 || ch != nil {
				break
			}
		}
		for i := range wc[:n] {
			w := &wc[i]
			if w.Status != cq.Success {
				return events, fmt.Errorf("Failed status %v (%d) for wr_id %d", w.Status, uint32(w.Status), int(w.WRID))
			}
			if err := p.Complete(w.WRID); err != nil {
				return events, err
			}
		}
	}
	return events, nil
}

// MarkPages and CheckPages are the C tools' -c: the client stamps the first
// byte of every page of its message and the server checks what it
// received. The C stamp is i/page_size % sizeof(char), which is always 0.
// The buffer starts filled with 0x7b, so a page that never arrived shows.
func MarkPages(msg []byte) {
	for i := 0; i < len(msg); i += os.Getpagesize() {
		msg[i] = 0
	}
}

// CheckPages reports every page of msg whose first byte is not the stamp.
func CheckPages(w io.Writer, msg []byte) {
	page := os.Getpagesize()
	for i := 0; i < len(msg); i += page {
		if msg[i] != 0 {
			fmt.Fprintf(w, "invalid data in page %d\n", i/page)
		}
	}
}
