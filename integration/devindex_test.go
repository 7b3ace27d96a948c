//go:build integration

package integration

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

const (
	rdmaNLNLDev          = 5 << 10 // RDMA_NL_NLDEV << RDMA_NL_GET_CLIENT_SHIFT
	rdmaNLDevCmdGet      = 1       // RDMA_NLDEV_CMD_GET
	rdmaNLDevAttrDevName = 2       // RDMA_NLDEV_ATTR_DEV_NAME
	rdmaNLDevAttrDevIdx  = 1       // RDMA_NLDEV_ATTR_DEV_INDEX
)

// devIndices dumps RDMA_NLDEV_CMD_GET itself and returns name → index.
func devIndices(t *testing.T) map[string]uint32 {
	t.Helper()
	msgs, err := nl.NewNetlinkRequest(rdmaNLNLDev|rdmaNLDevCmdGet, unix.NLM_F_DUMP).Execute(unix.NETLINK_RDMA, 0)
	if err != nil {
		t.Fatalf("rdma netlink device dump: %v", err)
	}
	idx := make(map[string]uint32)
	for _, m := range msgs {
		attrs, err := nl.ParseRouteAttr(m)
		if err != nil {
			t.Fatal(err)
		}
		var name string
		var i uint32
		for _, a := range attrs {
			switch a.Attr.Type {
			case rdmaNLDevAttrDevName:
				name = strings.TrimRight(string(a.Value), "\x00")
			case rdmaNLDevAttrDevIdx:
				i = binary.NativeEndian.Uint32(a.Value)
			}
		}
		idx[name] = i
	}
	return idx
}

// rxelink.DeviceIndex (ibv_get_device_index) agrees with the kernel's own
// device dump for every device, and the devices' indices differ.
func TestDeviceKernelIndex(t *testing.T) {
	want := devIndices(t)
	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[uint32]string)
	for _, d := range devs {
		got, err := rxelink.DeviceIndex(d.Name)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		w, ok := want[d.Name]
		if !ok || got != w {
			t.Errorf("%s: DeviceIndex %d, the kernel's dump says %d (listed: %v)", d.Name, got, w, ok)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s share index %d", d.Name, other, got)
		}
		seen[got] = d.Name
	}
	if len(devs) < 2 {
		t.Fatalf("want the topology's two devices, have %d", len(devs))
	}
}
