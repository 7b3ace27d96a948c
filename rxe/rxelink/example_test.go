package rxelink_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
)

// Soft-RoCE on eth0 of a host with neither modprobe nor rdma(8): load
// rdma_rxe, add the link, wait for the RoCE v2 GID of eth0's address, and
// remove the link at the end without risking a hang.
func Example() {
	if err := rxelink.LoadRxe(); err != nil {
		log.Fatal(err)
	}
	if err := rxelink.Add("rxe0", "eth0"); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	gid, err := rxelink.WaitGID(ctx, "rxe0", netip.MustParseAddr("192.0.2.1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("connect with GID index", gid.Index) // open the device, create QPs ...

	// ... and once every Context on rxe0 is closed:
	if err := rxelink.Delete(ctx, "rxe0"); err != nil {
		log.Fatal(err) // a *HeldError names the processes still holding it
	}
}
