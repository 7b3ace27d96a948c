//go:build integration

package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// What sysfs holds for an rxe device on this kernel, and what discovery
// makes of it without netlink: a virtual device (no device link, so no
// bound driver), node_type "1: CA" and a parent attribute naming the netdev.
func TestBindDriverFromSysfs(t *testing.T) {
	for i, name := range devices(t, 1) {
		dir := filepath.Join("/sys/class/infiniband", name)
		if _, err := os.Lstat(filepath.Join(dir, "device")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: device link: %v, want none (a virtual device)", name, err)
		}
		nt, _ := os.ReadFile(filepath.Join(dir, "node_type"))
		parent, _ := os.ReadFile(filepath.Join(dir, "parent"))
		netdev, _ := uvExpect(i)
		if strings.TrimSpace(string(nt)) != "1: CA" || strings.TrimSpace(string(parent)) != netdev {
			t.Errorf("%s: node_type %q, parent %q; want \"1: CA\", %q", name, nt, parent, netdev)
		}
		d, err := uverbs.DeviceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Driver != "rxe" || d.DriverID != uverbs.DriverRXE {
			t.Errorf("%s: driver %q (%v), want rxe", name, d.Driver, d.DriverID)
		}
		ctx := uvOpen(t, name)
		if ctx.DriverID() != uverbs.DriverRXE {
			t.Errorf("%s: context driver id %v", name, ctx.DriverID())
		}
	}
}

// The GID table read through the ioctl methods and read from sysfs (the
// fallback, taken by a context whose driver id is unknown) agree on every
// populated entry: GID, index, port, type and netdev.
func TestBindGIDSysfsMatchesIoctl(t *testing.T) {
	for _, name := range devices(t, 1) {
		d, err := uverbs.DeviceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		viaIoctl := uvOpen(t, name)
		d.DriverID = uverbs.DriverUnknown // no ioctls: the sysfs path
		viaSysfs, err := uverbs.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		defer viaSysfs.Close()
		a, err := viaIoctl.QueryGIDTable()
		if err != nil {
			t.Fatal(err)
		}
		b, err := viaSysfs.QueryGIDTable()
		if err != nil {
			t.Fatal(err)
		}
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%s: ioctl table %+v, sysfs table %+v", name, a, b)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s: entry %d: ioctl %+v, sysfs %+v", name, i, a[i], b[i])
			}
			e1, err1 := viaIoctl.QueryGID(a[i].Port, a[i].Index)
			e2, err2 := viaSysfs.QueryGID(a[i].Port, a[i].Index)
			if err1 != nil || err2 != nil || e1 != a[i] || e2 != a[i] {
				t.Errorf("%s: QueryGID(%d, %d): ioctl %+v %v, sysfs %+v %v; table %+v", name, a[i].Port, a[i].Index, e1, err1, e2, err2, a[i])
			}
		}
		t.Logf("%s: %d populated GIDs compared: %+v", name, len(a), a)
		// An unpopulated slot is ErrGIDUnused on both paths.
		last := a[len(a)-1]
		if _, err := viaSysfs.QueryGID(last.Port, last.Index+1); !errors.Is(err, uverbs.ErrGIDUnused) {
			t.Errorf("%s: sysfs QueryGID of the slot after the last one: %v, want ErrGIDUnused", name, err)
		}
		if _, err := viaIoctl.QueryGID(last.Port, last.Index+1); !errors.Is(err, uverbs.ErrGIDUnused) {
			t.Errorf("%s: ioctl QueryGID of the slot after the last one: %v, want ErrGIDUnused", name, err)
		}
	}
}
