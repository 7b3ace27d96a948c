package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// QueryPKey returns entry index of port's partition key table, as
// ibv_query_pkey does: from sysfs (ports/<port>/pkeys/<index>), there
// being no uverbs command for it. rxe has one entry, 0xffff (the default
// full-membership partition). An index outside the table is an error
// wrapping EINVAL.
func (c *Context) QueryPKey(port uint8, index int) (uint16, error) {
	const verb = "query_pkey"
	if c.released() {
		return 0, closedError(verb)
	}
	if index < 0 {
		return 0, fmt.Errorf("uverbs: %s: index %d: %w", verb, index, unix.EINVAL)
	}
	s, err := readString(filepath.Join(ibdevDir(c.sysfs, c.dev.Name), "ports", strconv.Itoa(int(port)), "pkeys", strconv.Itoa(index)))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("uverbs: %s: %s port %d has no P_Key index %d: %w", verb, c.dev.Name, port, index, unix.EINVAL)
	}
	if err != nil {
		return 0, fmt.Errorf("uverbs: %s: %w", verb, err)
	}
	v, err := strconv.ParseUint(s, 0, 16)
	if err != nil {
		return 0, fmt.Errorf("uverbs: %s: %s port %d index %d: malformed P_Key %q", verb, c.dev.Name, port, index, s)
	}
	return uint16(v), nil
}

// PKeyIndex returns the index of pkey in port's partition key table, as
// ibv_get_pkey_index does (full and limited membership are different keys
// here, as there). No such key is an error wrapping ENOENT. Both fail
// with ErrClosed after the Context's Close, as the commands do.
func (c *Context) PKeyIndex(port uint8, pkey uint16) (int, error) {
	for i := 0; ; i++ {
		v, err := c.QueryPKey(port, i)
		if errors.Is(err, unix.EINVAL) {
			return 0, fmt.Errorf("uverbs: get_pkey_index: %s port %d has no P_Key %#04x: %w", c.dev.Name, port, pkey, unix.ENOENT)
		}
		if err != nil {
			return 0, err
		}
		if v == pkey {
			return i, nil
		}
	}
}
