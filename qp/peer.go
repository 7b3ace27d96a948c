package qp

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

// Peer describes the other end of a connection: what two programs exchange
// out of band before Connect.
type Peer struct {
	LID uint16     // 0 on RoCE
	QPN uint32     // the peer's QP number (24 bits)
	PSN uint32     // the peer's initial send PSN (24 bits)
	GID uverbs.GID // the peer's GID (on RoCE, its RoCE v2 GID)
}

// PeerRecordLen is the size of the record rdma-core's pingpong examples
// send: the text of MarshalText and a terminating NUL.
const PeerRecordLen = len("0000:000000:000000:") + 32 + 1

// MarshalText formats p as rdma-core's pingpong examples (ibv_rc_pingpong
// and its siblings) exchange it: LID, QPN and PSN in zero-padded lower-case
// hex, then the GID as 32 hex digits in wire order, separated by colons
// ("0000:00abcd:012345:00000000000000000000ffff0a630001"). On the wire the
// examples send this text and a NUL, PeerRecordLen bytes.
func (p Peer) MarshalText() ([]byte, error) {
	b := fmt.Appendf(make([]byte, 0, PeerRecordLen), "%04x:%06x:%06x:", p.LID, p.QPN&0xffffff, p.PSN&0xffffff)
	return hex.AppendEncode(b, p.GID[:]), nil
}

// UnmarshalText parses what MarshalText formats, as the examples'
// sscanf("%x:%x:%x:%s") does: the numbers may have any width, anything from
// a NUL on is ignored, and the GID must be 32 hex digits.
func (p *Peer) UnmarshalText(text []byte) error {
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	f := strings.Split(string(text), ":")
	if len(f) != 4 {
		return fmt.Errorf("qp: malformed peer record %q: want LID:QPN:PSN:GID", text)
	}
	var nums [3]uint64
	for i, bits := range [3]int{16, 24, 24} {
		n, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return fmt.Errorf("qp: malformed peer record %q: %w", text, err)
		}
		nums[i] = n
	}
	var gid uverbs.GID
	if len(f[3]) != 2*len(gid) {
		return fmt.Errorf("qp: malformed peer record %q: GID is not %d hex digits", text, 2*len(gid))
	}
	if _, err := hex.Decode(gid[:], []byte(f[3])); err != nil {
		return fmt.Errorf("qp: malformed peer record %q: %w", text, err)
	}
	*p = Peer{LID: uint16(nums[0]), QPN: uint32(nums[1]), PSN: uint32(nums[2]), GID: gid}
	return nil
}
