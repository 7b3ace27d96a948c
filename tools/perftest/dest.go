package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

// dest is perftest's struct pingpong_dest: what one QP tells its peer.
type dest struct {
	lid      uint16
	outReads uint32
	qpn, psn uint32
	rkey     uint32
	vaddr    uint64
	gid      uverbs.GID
	srqn     uint32
}

// marshal writes d as KEY_PRINT_FMT_GID
// ("%04x:%04x:%06x:%06x:%08x:%016llx:" then 16 "%02x:" and "%08x:") and
// a NUL: 107 characters and the NUL fill the 108 bytes.
func (d *dest) marshal(b *[destLen]byte) {
	s := fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:", d.lid, d.outReads, d.qpn, d.psn, d.rkey, d.vaddr)
	var g strings.Builder
	for _, c := range d.gid {
		fmt.Fprintf(&g, "%02x:", c)
	}
	s += g.String() + fmt.Sprintf("%08x:", d.srqn)
	*b = [destLen]byte{}
	copy(b[:destLen-1], s)
}

// parseDest reads a record the way perftest's sscanf does: fields by
// position, hexadecimal, separated by colons.
func parseDest(b []byte) (dest, error) {
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(s, ":")
	if len(f) < 23 {
		return dest{}, fmt.Errorf("the peer's address record %q has %d fields, want 23", s, len(f))
	}
	hex := func(i, bits int) (uint64, error) {
		v, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return 0, fmt.Errorf("the peer's address record %q: field %d: %w", s, i, err)
		}
		return v, nil
	}
	var d dest
	var v [6]uint64
	for i, bits := range []int{16, 32, 32, 32, 32, 64} {
		n, err := hex(i, bits)
		if err != nil {
			return dest{}, err
		}
		v[i] = n
	}
	d.lid, d.outReads, d.qpn, d.psn, d.rkey, d.vaddr = uint16(v[0]), uint32(v[1]), uint32(v[2]), uint32(v[3]), uint32(v[4]), v[5]
	for i := range d.gid {
		n, err := hex(6+i, 8)
		if err != nil {
			return dest{}, err
		}
		d.gid[i] = byte(n)
	}
	n, err := hex(22, 32)
	if err != nil {
		return dest{}, err
	}
	d.srqn = uint32(n)
	return d, nil
}
