//go:build integration

package integration

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// rxe's partition key table has pkey_tbl_len (1) entries, the default
// full-membership key 0xffff at index 0; QueryPKey and PKeyIndex read it
// as ibv_query_pkey and ibv_get_pkey_index do.
func TestUverbsPKeyTable(t *testing.T) {
	for _, name := range devices(t, 1) {
		d, err := uverbs.DeviceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		ctx, err := uverbs.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Close()
		pa, err := ctx.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		if pa.PKeyTableLen < 1 {
			t.Fatalf("%s: pkey_tbl_len %d", name, pa.PKeyTableLen)
		}
		if v, err := ctx.QueryPKey(1, 0); err != nil || v != 0xffff {
			t.Errorf("%s: P_Key 0 = %#x, %v; want 0xffff", name, v, err)
		}
		if _, err := ctx.QueryPKey(1, pa.PKeyTableLen); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: P_Key %d (past the table of %d) = %v, want EINVAL", name, pa.PKeyTableLen, pa.PKeyTableLen, err)
		}
		if i, err := ctx.PKeyIndex(1, 0xffff); err != nil || i != 0 {
			t.Errorf("%s: index of 0xffff = %d, %v; want 0", name, i, err)
		}
		if _, err := ctx.PKeyIndex(1, 0x7fff); !errors.Is(err, unix.ENOENT) {
			t.Errorf("%s: index of the limited-membership key 0x7fff = %v, want ENOENT", name, err)
		}
	}
}
