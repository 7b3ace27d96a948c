// Command rxe-info lists RDMA devices the way pureverbs sees them: the uverbs
// character device, node GUID and ABI version from sysfs, then, through the
// device's own commands, its limits, every port's state and MTU, and the GID
// table with each entry's type and netdev.
//
//	rxe-info [-d rxe0]
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	dev := flag.String("d", "", "show only this device (ibdev name)")
	flag.Parse()
	if err := run(os.Stdout, *dev); err != nil {
		fmt.Fprintln(os.Stderr, "rxe-info:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, only string) error {
	devs, err := uverbs.Devices()
	if err != nil {
		return err
	}
	if len(devs) == 0 {
		return fmt.Errorf("no RDMA devices (is ib_uverbs loaded and an rxe link added?)")
	}
	shown := 0
	for _, d := range devs {
		if only != "" && d.Name != only {
			continue
		}
		shown++
		if err := show(w, d); err != nil {
			return err
		}
	}
	if shown == 0 {
		return fmt.Errorf("no device named %q", only)
	}
	return nil
}

func show(w io.Writer, d uverbs.Device) error {
	fmt.Fprintf(w, "device %s\n  uverbs %s (driver ABI %d, command ABI %d)\n  node GUID %016x\n",
		d.Name, d.Path, d.ABIVersion, d.CommandABI, d.NodeGUID)
	ctx, err := uverbs.Open(d)
	if err != nil {
		return err
	}
	defer ctx.Close()
	attr, err := ctx.QueryDevice()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  driver %s, max QP %d, max QP WR %d, max SGE %d, max CQE %d, max MR size %d\n",
		ctx.DriverID(), attr.MaxQP, attr.MaxQPWR, attr.MaxSGE, attr.MaxCQE, attr.MaxMRSize)
	gids, err := ctx.QueryGIDTable()
	if err != nil {
		return err
	}
	for port := uint8(1); int(port) <= attr.PhysPortCnt; port++ {
		p, err := ctx.QueryPort(port)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  port %d: %s, active MTU %s (max %s), link layer %s, GID table %d slots\n",
			port, p.State, p.ActiveMTU, p.MaxMTU, p.LinkLayer, p.GIDTableLen)
		for _, g := range gids {
			if g.Port != port {
				continue
			}
			netdev := "-"
			if ifi, err := net.InterfaceByIndex(g.NetdevIndex); err == nil {
				netdev = ifi.Name
			}
			fmt.Fprintf(w, "    GID[%d] %s %s netdev %s\n", g.Index, g.GID, g.Type, netdev)
		}
	}
	return nil
}
