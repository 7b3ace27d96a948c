package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeSysfs builds a /sys-like tree in a temporary directory.
type fakeSysfs struct {
	t    *testing.T
	root string
}

func newFakeSysfs(t *testing.T, commandABI string) *fakeSysfs {
	f := &fakeSysfs{t: t, root: t.TempDir()}
	if commandABI != "" {
		f.write("class/infiniband_verbs/abi_version", commandABI)
	}
	return f
}

func (f *fakeSysfs) write(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// device adds uverbsN with the files the kernel creates (ibdev, abi_version,
// dev, uevent) and the ibdev's node_guid.
func (f *fakeSysfs) device(uverbs, ibdev, abi, guid string) {
	dir := "class/infiniband_verbs/" + uverbs + "/"
	f.write(dir+"ibdev", ibdev+"\n")
	f.write(dir+"abi_version", abi+"\n")
	f.write(dir+"dev", "231:192\n")
	f.write(dir+"uevent", "MAJOR=231\nMINOR=192\nDEVNAME=infiniband/"+uverbs+"\n")
	f.write("class/infiniband/"+ibdev+"/node_guid", guid+"\n")
}

func (f *fakeSysfs) devices() ([]Device, error) {
	return discovery{sysfs: f.root, dev: "/dev"}.devices()
}

func TestDevices(t *testing.T) {
	f := newFakeSysfs(t, "6\n")
	f.device("uverbs10", "rxe10", "2", "0250:b6ff:fe00:000a")
	f.device("uverbs1", "rxe1", "2", "0250:b6ff:fe00:0002")
	f.device("uverbs0", "rxe0", "1", "0250:b6ff:fe00:0001")
	f.write("class/infiniband_verbs/abi_version_not_a_device/x", "")

	got, err := f.devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Name: "rxe0", Path: "/dev/infiniband/uverbs0", Index: 0, NodeGUID: 0x0250b6fffe000001, ABIVersion: 1, CommandABI: 6, Driver: "rxe", DriverID: DriverRXE, NodeType: NodeUnknown},
		{Name: "rxe1", Path: "/dev/infiniband/uverbs1", Index: 1, NodeGUID: 0x0250b6fffe000002, ABIVersion: 2, CommandABI: 6, Driver: "rxe", DriverID: DriverRXE, NodeType: NodeUnknown},
		{Name: "rxe10", Path: "/dev/infiniband/uverbs10", Index: 10, NodeGUID: 0x0250b6fffe00000a, ABIVersion: 2, CommandABI: 6, Driver: "rxe", DriverID: DriverRXE, NodeType: NodeUnknown},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
}

// The driver comes from sysfs alone: rdma_rxe's "parent" attribute on a
// channel adapter (whatever the device is called), a hardware device's
// bound driver, else the rxe/siw name prefix.
func TestDevicesDriver(t *testing.T) {
	f := newFakeSysfs(t, "6")
	f.device("uverbs0", "roce7", "2", "0000:0000:0000:0001")
	f.write("class/infiniband/roce7/node_type", "1: CA\n")
	f.write("class/infiniband/roce7/parent", "veth0\n")
	f.device("uverbs1", "mlx5_0", "1", "0000:0000:0000:0002")
	f.write("class/infiniband/mlx5_0/node_type", "1: CA\n")
	f.write("drivers/mlx5_core/x", "")
	if err := os.MkdirAll(filepath.Join(f.root, "devices/pci0000:00/0000:00:03.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.root, "drivers/mlx5_core"), filepath.Join(f.root, "devices/pci0000:00/0000:00:03.0/driver")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.root, "devices/pci0000:00/0000:00:03.0"), filepath.Join(f.root, "class/infiniband/mlx5_0/device")); err != nil {
		t.Fatal(err)
	}
	f.device("uverbs2", "siw_eth0", "1", "0000:0000:0000:0003")
	f.write("class/infiniband/siw_eth0/node_type", "4: RNIC\n")
	f.device("uverbs3", "odd0", "1", "0000:0000:0000:0004")
	f.write("class/infiniband/odd0/node_type", "4: RNIC\n")
	f.write("class/infiniband/odd0/parent", "eth0\n")
	got, err := f.devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		driver string
		id     DriverID
	}{{"rxe", DriverRXE}, {"mlx5_core", DriverUnknown}, {"siw", DriverSIW}, {"", DriverUnknown}}
	if len(got) != len(want) {
		t.Fatalf("devices = %+v", got)
	}
	for i, w := range want {
		if got[i].Driver != w.driver || got[i].DriverID != w.id {
			t.Errorf("%s: driver %q (%v), want %q (%v)", got[i].Name, got[i].Driver, got[i].DriverID, w.driver, w.id)
		}
	}
}

func TestDevicesDevnameFromUevent(t *testing.T) {
	f := newFakeSysfs(t, "6")
	f.device("uverbs0", "rxe0", "2", "0000:0000:0000:0001")
	f.write("class/infiniband_verbs/uverbs0/uevent", "MAJOR=231\nDEVNAME=rdma/verbs0\n")
	got, err := f.devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Path != "/dev/rdma/verbs0" {
		t.Errorf("devices = %+v, want the path udev names after DEVNAME", got)
	}
}

func TestDevicesCommandABI(t *testing.T) {
	f := newFakeSysfs(t, "5\n")
	f.device("uverbs0", "rxe0", "2", "0000:0000:0000:0001")
	_, err := f.devices()
	var abi *ABIError
	if !errors.As(err, &abi) || abi.Version != 5 || !errors.Is(err, ErrNotSupported) {
		t.Fatalf("devices with command ABI 5 = %v, want an ABIError wrapping ErrNotSupported", err)
	}
	if want := "uverbs: uverbs command ABI version 5 not supported (need 6)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestDevicesNoUverbs(t *testing.T) {
	f := newFakeSysfs(t, "")
	if _, err := f.devices(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("devices without ib_uverbs = %v, want fs.ErrNotExist", err)
	}
}

func TestDevicesEmpty(t *testing.T) {
	f := newFakeSysfs(t, "6")
	got, err := f.devices()
	if err != nil || len(got) != 0 {
		t.Errorf("devices = %v, %v; want none", got, err)
	}
}

func TestDevicesBroken(t *testing.T) {
	for name, setup := range map[string]func(f *fakeSysfs){
		"bad guid": func(f *fakeSysfs) { f.device("uverbs0", "rxe0", "2", "zz:00") },
		"bad abi":  func(f *fakeSysfs) { f.device("uverbs0", "rxe0", "two", "0000:0000:0000:0001") },
		"no node_guid": func(f *fakeSysfs) {
			f.write("class/infiniband_verbs/uverbs0/ibdev", "rxe0")
			f.write("class/infiniband_verbs/uverbs0/abi_version", "2")
		},
	} {
		f := newFakeSysfs(t, "6")
		setup(f)
		if d, err := f.devices(); err == nil {
			t.Errorf("%s: devices = %+v, want an error", name, d)
		}
	}
}

func TestParseGUID(t *testing.T) {
	for in, want := range map[string]uint64{
		"0000:0000:0000:0000": 0,
		"ffff:ffff:ffff:ffff": 1<<64 - 1,
		"0250:B6FF:FE00:1234": 0x0250b6fffe001234,
	} {
		if got, err := parseGUID(in); err != nil || got != want {
			t.Errorf("parseGUID(%q) = %#x, %v; want %#x", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0:0:0:0", "00000:0000:0000:000", "0000:0000:0000", "0000:0000:0000:00g0"} {
		if _, err := parseGUID(in); err == nil {
			t.Errorf("parseGUID(%q) succeeded", in)
		}
	}
}

func TestDriverABI(t *testing.T) {
	for abi, ok := range map[int]bool{0: false, 1: true, 2: true, 3: false} {
		err := checkDriverABI(Device{Name: "rxe0", ABIVersion: abi, Driver: "rxe", DriverID: DriverRXE})
		if ok != (err == nil) {
			t.Errorf("rxe driver ABI %d: %v", abi, err)
		}
		if err != nil && (!errors.Is(err, ErrNotSupported) || err.Error() != fmt.Sprintf("uverbs: rxe0 driver ABI version %d not supported (need 1..2)", abi)) {
			t.Errorf("rxe driver ABI %d: error %q", abi, err)
		}
	}
	if err := checkDriverABI(Device{Name: "mlx5_0", ABIVersion: 1, Driver: "mlx5_core"}); err != nil {
		t.Errorf("other drivers are not judged here: %v", err)
	}
}
