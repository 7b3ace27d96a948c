package uverbs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Waiting for the device's asynchronous events (port state changes, CQ
// overruns, SRQ limits, drained send queues), each resolved to the object
// it concerns: the *cq.CQ, *qp.QP or *qp.SRQ the program holds.
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
		if ev.Type == uverbs.EventPortErr {
			fmt.Printf("port %d went down\n", ev.Port)
			continue
		}
		switch o := ev.Object.(type) { // the object the application created
		case *qp.SRQ:
			fmt.Printf("%v on SRQ %d: post more receives\n", ev.Type, o.Num())
		case *qp.QP:
			fmt.Printf("%v on QP %#x\n", ev.Type, o.Num())
		case *cq.CQ:
			fmt.Printf("%v on a CQ\n", ev.Type)
		default:
			fmt.Println(ev)
		}
	}
}
