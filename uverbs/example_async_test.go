package uverbs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

// Waiting for the device's asynchronous events (port state changes, CQ
// overruns, SRQ limits, drained send queues), each resolved to the object
// it concerns.
func ExampleContext_WaitAsyncEvent() {
	dev, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	wait, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		ev, err := ctx.WaitAsyncEvent(wait)
		if err != nil {
			return // the minute is over (or the Context was closed)
		}
		switch {
		case ev.Type == uverbs.EventPortErr:
			fmt.Printf("port %d went down\n", ev.Port)
		case ev.SRQ != nil:
			fmt.Printf("%v on an SRQ: post more receives\n", ev.Type)
		default:
			fmt.Println(ev)
		}
	}
}
