package uverbs_test

import (
	"fmt"
	"log"

	"github.com/pureverbs/pureverbs/uverbs"
)

// List every RDMA device with its ports and populated GIDs, like a small
// ibv_devinfo -v. Needs an RDMA device (e.g. rdma_rxe), so it has no
// checked output.
func ExampleOpen() {
	devs, err := uverbs.Devices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		ctx, err := uverbs.Open(d)
		if err != nil {
			log.Fatal(err)
		}
		attr, err := ctx.QueryDevice()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (%s): node GUID %016x, %d port(s), max_cqe %d, max_qp_wr %d\n",
			d.Name, d.Path, d.NodeGUID, attr.PhysPortCnt, attr.MaxCQE, attr.MaxQPWR)
		for p := 1; p <= attr.PhysPortCnt; p++ {
			pa, err := ctx.QueryPort(uint8(p))
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("  port %d: %v, active MTU %v, link layer %v\n", p, pa.State, pa.ActiveMTU, pa.LinkLayer)
		}
		gids, err := ctx.QueryGIDTable()
		if err != nil {
			log.Fatal(err)
		}
		for _, g := range gids {
			fmt.Printf("  GID[%d] port %d: %v (%v, ifindex %d)\n", g.Index, g.Port, g.GID, g.Type, g.NetdevIndex)
		}
		ctx.Close()
	}
}

// Register off-heap memory for RDMA: a page-aligned buffer outside the Go
// heap, registered with local write and remote read access.
func ExamplePD_RegisterMR() {
	d, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := uverbs.Open(d)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	buf, err := uverbs.NewBuffer(1<<20, uverbs.BufferOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	fmt.Printf("MR at %#x, %d bytes, lkey %#x rkey %#x\n", mr.Addr(), mr.Len(), mr.LKey(), mr.RKey())
}
