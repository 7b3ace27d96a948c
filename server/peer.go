package server

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/pureverbs/pureverbs/uverbs"
)

// TODO(issue 7): replace with qp.Peer and its MarshalText/UnmarshalText
// once the core lands; this codec is the same wire format.

// Peer is one end's connection data as rdma-core's pingpong examples
// trade it: LID (0 on RoCE), QP number, first PSN it sends with, GID.
type Peer struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID uverbs.GID
}

// RecordLen is the size of the side channel's record on the wire:
// "LLLL:QQQQQQ:PPPPPP:" + 32 hex GID digits + NUL.
const RecordLen = 4 + 1 + 6 + 1 + 6 + 1 + 32 + 1

// doneMsg is the client's last word after it read the server's record.
var doneMsg = []byte("done\x00")

// MarshalText formats p as "%04x:%06x:%06x:" and the GID as 32 hex digits
// in byte order (without the NUL).
func (p Peer) MarshalText() ([]byte, error) {
	b := fmt.Appendf(make([]byte, 0, RecordLen), "%04x:%06x:%06x:", p.LID, p.QPN&0xffffff, p.PSN&0xffffff)
	return hex.AppendEncode(b, p.GID[:]), nil
}

// record is the 52-byte wire form: MarshalText and a NUL.
func (p Peer) record() []byte {
	b, _ := p.MarshalText()
	return append(b, 0)
}

// UnmarshalText parses a record (a trailing NUL and what follows it are
// ignored). Like the C examples' sscanf("%x:%x:%x:%s") the numbers may be
// shorter than their field; they must be hex and fit 16/24/24 bits, and
// the GID must be exactly 32 hex digits.
func (p *Peer) UnmarshalText(text []byte) error {
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	f := bytes.Split(text, []byte(":"))
	if len(f) != 4 {
		return fmt.Errorf("server: malformed peer record %q: want LID:QPN:PSN:GID", text)
	}
	var v [3]uint64
	for i, bits := range [3]int{16, 24, 24} {
		n, err := strconv.ParseUint(string(f[i]), 16, bits)
		if err != nil {
			return fmt.Errorf("server: malformed peer record %q: field %d: %w", text, i+1, err)
		}
		v[i] = n
	}
	var g uverbs.GID
	if len(f[3]) != 2*len(g) {
		return fmt.Errorf("server: malformed peer record %q: GID is %d characters, want 32 hex digits", text, len(f[3]))
	}
	if _, err := hex.Decode(g[:], f[3]); err != nil {
		return fmt.Errorf("server: malformed peer record %q: GID: %w", text, err)
	}
	*p = Peer{LID: uint16(v[0]), QPN: uint32(v[1]), PSN: uint32(v[2]), GID: g}
	return nil
}
