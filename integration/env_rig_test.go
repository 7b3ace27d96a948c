//go:build integration

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// devices returns the rxe devices the harness created (RXEVM_DEVICES), and
// fails the test when there are fewer than want: an integration test never
// silently skips inside the VM.
func devices(t testing.TB, want int) []string {
	t.Helper()
	devs := strings.Fields(os.Getenv("RXEVM_DEVICES"))
	if len(devs) == 0 {
		devs = []string{"rxe0", "rxe1"} // make test-host builds the veth layout
	}
	if len(devs) < want {
		t.Fatalf("this test needs %d rxe devices, the topology has %v", want, devs)
	}
	return devs
}

// gidIndex returns the index of dev's RoCE v2 GID of its IPv4 address as
// the harness found it (RXEVM_GID_INDEXES, in RXEVM_DEVICES' order), or, on
// a machine set up otherwise, as dev's GID table shows it now. A fresh
// link's table fills in no fixed order: never assume index 1.
func gidIndex(t testing.TB, dev string) int {
	t.Helper()
	devs, idxs := strings.Fields(os.Getenv("RXEVM_DEVICES")), strings.Fields(os.Getenv("RXEVM_GID_INDEXES"))
	for i, d := range devs {
		if d == dev && i < len(idxs) {
			n, err := strconv.Atoi(idxs[i])
			if err != nil {
				t.Fatalf("RXEVM_GID_INDEXES=%q: %v", os.Getenv("RXEVM_GID_INDEXES"), err)
			}
			return n
		}
	}
	gids, err := rxelink.GIDs(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gids {
		if g.Type == uverbs.GIDTypeRoCEv2 && g.GID.Addr().Unmap().Is4() {
			return g.Index
		}
	}
	t.Fatalf("%s has no RoCE v2 GID of an IPv4 address: %v", dev, gids)
	return 0
}

// gidArg is gidIndex as a C tool's -g/-x argument.
func gidArg(t testing.TB, dev string) string {
	t.Helper()
	return strconv.Itoa(gidIndex(t, dev))
}

// kernelAtLeast reports whether the running kernel is major.minor or newer.
func kernelAtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", u.Release[:], err)
	}
	return ma > major || (ma == major && mi >= minor)
}

// within receives from ch, or fails the test after 30 s.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30 s", what)
		var zero T
		return zero
	}
}

// uvOpen opens device name; t.Cleanup closes the context.
func uvOpen(t testing.TB, name string) *uverbs.Context {
	t.Helper()
	d, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := uverbs.Open(d)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { ctx.Close() })
	return ctx
}
