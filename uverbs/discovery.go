package uverbs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Device is one RDMA device that has a uverbs character device.
type Device struct {
	Name       string // ibdev name, e.g. "rxe0"
	Path       string // character device, e.g. "/dev/infiniband/uverbs0"
	Index      int    // N of uverbsN
	NodeGUID   uint64 // as shown in sysfs node_guid (big-endian reading)
	ABIVersion int    // driver ABI version (uverbsN/abi_version); rdma_rxe reports 2 on 6.1
	CommandABI int    // uverbs command ABI (infiniband_verbs/abi_version), always 6 here

	// Driver names the kernel driver as sysfs shows it: "rxe" for
	// Soft-RoCE, the bound driver of a hardware device (e.g.
	// "mlx5_core"), or "" when sysfs does not tell. DriverID is its uverbs
	// driver id when this package knows it (rxe, siw), else DriverUnknown.
	Driver   string
	DriverID DriverID

	NodeType NodeType // from sysfs node_type; NodeCA for rxe
	BoardID  string   // sysfs board_id, "" when the driver has none (rxe)
}

// discovery says where Devices looks; tests point it at a fake tree.
type discovery struct {
	sysfs string // normally "/sys"
	dev   string // normally "/dev"
}

var hostDiscovery = discovery{sysfs: "/sys", dev: "/dev"}

// Devices lists every device under /sys/class/infiniband_verbs, ordered by
// uverbs index. It fails with an *ABIError if the kernel's uverbs command ABI
// is not the one this package speaks, and with an error wrapping
// fs.ErrNotExist if ib_uverbs is not loaded.
func Devices() ([]Device, error) { return hostDiscovery.devices() }

// DeviceByName returns the device whose ibdev name is name.
func DeviceByName(name string) (Device, error) {
	devs, err := Devices()
	if err != nil {
		return Device{}, err
	}
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	return Device{}, fmt.Errorf("uverbs: no RDMA device %q: %w", name, fs.ErrNotExist)
}

func (s discovery) devices() ([]Device, error) {
	class := filepath.Join(s.sysfs, "class", "infiniband_verbs")
	abi, err := readInt(filepath.Join(class, "abi_version"))
	if err != nil {
		return nil, fmt.Errorf("uverbs: ib_uverbs not available: %w", err)
	}
	if abi != commandABIVersion {
		return nil, &ABIError{What: "uverbs command ABI", Version: abi, Min: commandABIVersion, Max: commandABIVersion}
	}
	ents, err := os.ReadDir(class)
	if err != nil {
		return nil, fmt.Errorf("uverbs: %w", err)
	}
	var devs []Device
	for _, e := range ents {
		idx, ok := strings.CutPrefix(e.Name(), "uverbs")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(idx)
		if err != nil {
			continue
		}
		d, err := s.device(filepath.Join(class, e.Name()), n)
		if err != nil {
			return nil, err
		}
		d.CommandABI = abi
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Index < devs[j].Index })
	return devs, nil
}

func (s discovery) device(dir string, index int) (Device, error) {
	d := Device{Index: index, Path: filepath.Join(s.dev, "infiniband", filepath.Base(dir))}
	name, err := readString(filepath.Join(dir, "ibdev"))
	if err != nil {
		return d, fmt.Errorf("uverbs: %w", err)
	}
	d.Name = name
	if d.ABIVersion, err = readInt(filepath.Join(dir, "abi_version")); err != nil {
		return d, fmt.Errorf("uverbs: %s: %w", name, err)
	}
	// udev names the node after DEVNAME; it is infiniband/uverbsN everywhere
	// we know of, but follow the kernel's word when it gives one.
	if ev, err := os.ReadFile(filepath.Join(dir, "uevent")); err == nil {
		for _, line := range strings.Split(string(ev), "\n") {
			if v, ok := strings.CutPrefix(line, "DEVNAME="); ok && v != "" {
				d.Path = filepath.Join(s.dev, v)
			}
		}
	}
	guid, err := readString(filepath.Join(s.sysfs, "class", "infiniband", name, "node_guid"))
	if err != nil {
		return d, fmt.Errorf("uverbs: %s: %w", name, err)
	}
	if d.NodeGUID, err = parseGUID(guid); err != nil {
		return d, fmt.Errorf("uverbs: %s: node_guid: %w", name, err)
	}
	d.Driver, d.DriverID = driverOf(filepath.Join(s.sysfs, "class", "infiniband", name))
	s.sysfsExtras(&d)
	return d, nil
}

// driverOf names the driver of the ibdev whose sysfs directory is dir, from
// sysfs alone (no netlink), the way rdma-core's providers claim devices:
//   - rdma_rxe is the only driver with a "parent" attribute (the netdev it
//     runs on) on a channel adapter ("1: CA"); siw's devices are RNICs;
//   - a hardware device links device/driver to its bound driver;
//   - otherwise the name prefix "rxe" or "siw" (librxe's and libsiw's name
//     match), else unknown.
func driverOf(dir string) (string, DriverID) {
	nodeType, _ := readString(filepath.Join(dir, "node_type"))
	if _, err := os.Stat(filepath.Join(dir, "parent")); err == nil && strings.HasPrefix(nodeType, "1:") {
		return "rxe", DriverRXE
	}
	if target, err := os.Readlink(filepath.Join(dir, "device", "driver")); err == nil {
		return filepath.Base(target), DriverUnknown
	}
	name := filepath.Base(dir)
	for _, id := range []DriverID{DriverRXE, DriverSIW} {
		if strings.HasPrefix(name, id.String()) {
			return id.String(), id
		}
	}
	return "", DriverUnknown
}

// parseGUID parses sysfs GID/GUID notation "0011:22ff:fe33:4455".
func parseGUID(s string) (uint64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return 0, fmt.Errorf("malformed GUID %q", s)
	}
	var g uint64
	for _, p := range parts {
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil || len(p) != 4 {
			return 0, fmt.Errorf("malformed GUID %q", s)
		}
		g = g<<16 | v
	}
	return g, nil
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt(path string) (int, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}
