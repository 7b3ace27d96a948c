package uverbs

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// P_Keys come from sysfs as "0xffff"; libibverbs reads them with %hx.
func TestQueryPKey(t *testing.T) {
	f := newFakeSysfs(t, "6")
	f.write("class/infiniband/rxe0/ports/1/pkeys/0", "0xffff\n")
	f.write("class/infiniband/rxe0/ports/1/pkeys/1", "0x7fff\n")
	f.write("class/infiniband/rxe0/ports/1/pkeys/2", "junk\n")
	c := &Context{dev: Device{Name: "rxe0"}, sysfs: f.root}
	if v, err := c.QueryPKey(1, 0); err != nil || v != 0xffff {
		t.Errorf("QueryPKey(1, 0) = %#x, %v; want 0xffff", v, err)
	}
	if v, err := c.QueryPKey(1, 1); err != nil || v != 0x7fff {
		t.Errorf("QueryPKey(1, 1) = %#x, %v; want 0x7fff", v, err)
	}
	for _, tc := range []struct {
		port  uint8
		index int
	}{{1, 3}, {2, 0}, {1, -1}} {
		if _, err := c.QueryPKey(tc.port, tc.index); !errors.Is(err, unix.EINVAL) {
			t.Errorf("QueryPKey(%d, %d) = %v, want EINVAL", tc.port, tc.index, err)
		}
	}
	if _, err := c.QueryPKey(1, 2); err == nil {
		t.Errorf("a malformed P_Key was accepted")
	}
	if i, err := c.PKeyIndex(1, 0x7fff); err != nil || i != 1 {
		t.Errorf("PKeyIndex(0x7fff) = %d, %v; want 1", i, err)
	}
	c2 := &Context{dev: Device{Name: "rxe0"}, sysfs: f.root}
	f.write("class/infiniband/rxe0/ports/2/pkeys/0", "0xffff\n")
	if _, err := c2.PKeyIndex(2, 0x8001); !errors.Is(err, unix.ENOENT) {
		t.Errorf("PKeyIndex of a missing key = %v, want ENOENT", err)
	}
}
