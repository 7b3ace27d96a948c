package uverbs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The GID table as sysfs shows it, for kernels or devices where the GID
// ioctl methods are not available: under /sys/class/infiniband/<dev>/ports/<p>,
// gids/<i> holds the GID ("fe80:0000:...", eight groups), gid_attrs/types/<i>
// its type ("RoCE v2", or "IB/RoCE v1", which is RoCE v1 on an Ethernet
// port) and gid_attrs/ndevs/<i> the name of its netdev. The type and netdev
// files of an empty slot cannot be read.

// SysfsGIDTable reads every populated GID of every port of the RDMA device
// name from the sysfs mounted at root (normally "/sys"), ordered by port
// and index, without opening the device: what QueryGIDTable returns on a
// kernel without the GID ioctl methods. An entry whose type or netdev
// cannot be read fails the read (a table being filled is read again).
func SysfsGIDTable(root, name string) ([]GIDEntry, error) {
	return readSysfsGIDTable(root, name, "read_gid_table")
}

// sysfsGIDTable reads the Context's GID table from sysfs. Like the
// commands, it fails with ErrClosed after the Context's Close.
func (c *Context) sysfsGIDTable(verb string) ([]GIDEntry, error) {
	if c.released() {
		return nil, closedError(verb)
	}
	return readSysfsGIDTable(c.sysfs, c.dev.Name, verb)
}

// sysfsGID reads one slot of port's GID table from sysfs. Like the
// commands, it fails with ErrClosed after the Context's Close.
func (c *Context) sysfsGID(verb string, port uint8, index int) (GIDEntry, error) {
	if c.released() {
		return GIDEntry{}, closedError(verb)
	}
	return readSysfsGID(c.sysfs, c.dev.Name, verb, port, index)
}

// ibdevDir is device name's directory in the sysfs at root.
func ibdevDir(root, name string) string {
	return filepath.Join(root, "class", "infiniband", name)
}

// readSysfsGIDTable is the one reader of a GID table in sysfs.
func readSysfsGIDTable(root, name, verb string) ([]GIDEntry, error) {
	ports, err := os.ReadDir(filepath.Join(ibdevDir(root, name), "ports"))
	if err != nil {
		return nil, fmt.Errorf("uverbs: %s: %w", verb, err)
	}
	var out []GIDEntry
	for _, p := range ports {
		port, err := strconv.ParseUint(p.Name(), 10, 8)
		if err != nil {
			continue
		}
		gids, err := os.ReadDir(filepath.Join(ibdevDir(root, name), "ports", p.Name(), "gids"))
		if err != nil {
			return nil, fmt.Errorf("uverbs: %s: %w", verb, err)
		}
		var idx []int
		for _, g := range gids {
			if i, err := strconv.Atoi(g.Name()); err == nil && i >= 0 {
				idx = append(idx, i)
			}
		}
		sort.Ints(idx)
		for _, i := range idx {
			e, err := readSysfsGID(root, name, verb, uint8(port), i)
			if errors.Is(err, ErrGIDUnused) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Port < out[b].Port })
	return out, nil
}

// readSysfsGID reads one slot of port's GID table from sysfs.
func readSysfsGID(root, name, verb string, port uint8, index int) (GIDEntry, error) {
	dir := filepath.Join(ibdevDir(root, name), "ports", strconv.Itoa(int(port)))
	i := strconv.Itoa(index)
	s, err := readString(filepath.Join(dir, "gids", i))
	if err != nil {
		return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: %w", verb, port, index, err)
	}
	gid, err := parseSysfsGID(s)
	if err != nil {
		return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: %w", verb, port, index, err)
	}
	if gid.IsZero() {
		return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: %w", verb, port, index, ErrGIDUnused)
	}
	e := GIDEntry{GID: gid, Index: index, Port: port}
	typ, err := readString(filepath.Join(dir, "gid_attrs", "types", i))
	if err != nil {
		return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: type: %w", verb, port, index, err)
	}
	switch typ {
	case "RoCE v2":
		e.Type = GIDTypeRoCEv2
	case "IB/RoCE v1":
		e.Type = GIDTypeIB
		if ll, _ := readString(filepath.Join(dir, "link_layer")); ll == "Ethernet" {
			e.Type = GIDTypeRoCEv1
		}
	default:
		return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: unknown GID type %q: %w", verb, port, index, typ, ErrNotSupported)
	}
	// An IB GID has no netdev: its ndevs file cannot be read.
	if ndev, err := readString(filepath.Join(dir, "gid_attrs", "ndevs", i)); err == nil && ndev != "" {
		ifindex, err := readInt(filepath.Join(root, "class", "net", ndev, "ifindex"))
		if err != nil {
			return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: netdev %s: %w", verb, port, index, ndev, err)
		}
		e.NetdevIndex = ifindex
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) && e.Type != GIDTypeIB {
		return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: netdev: %w", verb, port, index, err)
	}
	return e, nil
}

// parseSysfsGID parses sysfs GID notation: eight groups of four hex digits
// separated by colons.
func parseSysfsGID(s string) (GID, error) {
	var g GID
	parts := strings.Split(s, ":")
	if len(parts) != 8 {
		return g, fmt.Errorf("malformed GID %q", s)
	}
	for k, p := range parts {
		if len(p) != 4 {
			return g, fmt.Errorf("malformed GID %q", s)
		}
		if _, err := hex.Decode(g[2*k:2*k+2], []byte(p)); err != nil {
			return g, fmt.Errorf("malformed GID %q", s)
		}
	}
	return g, nil
}
