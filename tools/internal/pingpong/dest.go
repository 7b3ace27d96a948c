package pingpong

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Dest is one end's connection data, as the two ends trade it over TCP
// before the QPs can be connected.
type Dest struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID uverbs.GID
}

// MsgLen is the size of the exchange message: ibv_rc_pingpong sends the
// whole buffer sized for "LLLL:QQQQQQ:PPPPPP:" plus 32 GID digits and the
// terminating NUL, 52 bytes, and reads exactly that many.
const MsgLen = qp.PeerRecordLen

// doneMsg is the client's last word, "done" with its NUL; the server waits
// for it before either side starts the ping-pong.
var doneMsg = [...]byte{'d', 'o', 'n', 'e', 0}

// Marshal formats d as the exchange message: qp.Peer's text (LID, QPN and
// PSN in zero-padded lower-case hex, the GID as 32 hex digits in wire
// order) and a NUL.
func (d Dest) Marshal() [MsgLen]byte {
	var m [MsgLen]byte
	text, _ := qp.Peer{LID: d.LID, QPN: d.QPN, PSN: d.PSN, GID: d.GID}.MarshalText()
	copy(m[:], text)
	return m
}

// ParseDest reads an exchange message from the peer as the C tool's
// sscanf("%x:%x:%x:%s") does (qp.Peer's UnmarshalText).
func ParseDest(msg []byte) (Dest, error) {
	var p qp.Peer
	if err := p.UnmarshalText(msg); err != nil {
		return Dest{}, fmt.Errorf("malformed address message: %w", err)
	}
	return Dest{LID: p.LID, QPN: p.QPN, PSN: p.PSN, GID: p.GID}, nil
}

// HasGlobalRoute says whether the peer's address needs a GRH: the C tool
// sets one up when the interface-ID half of the GID is non-zero.
func (d Dest) HasGlobalRoute() bool {
	return binary.BigEndian.Uint64(d.GID[8:]) != 0
}

// FormatGID prints a GID the way glibc's inet_ntop(AF_INET6) does: the
// longest run (of two or more) of zero groups becomes "::", and an address
// whose first 96 bits are zero or which is IPv4-mapped ends in dotted
// decimal. Go's netip differs for the IPv4-compatible form (::a.b.c.d).
func FormatGID(g uverbs.GID) string {
	var w [8]uint16
	for i := range w {
		w[i] = uint16(g[2*i])<<8 | uint16(g[2*i+1])
	}
	best, bestLen := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > bestLen {
			best, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		best = -1
	}
	var sb strings.Builder
	for i := 0; i < 8; i++ {
		if best >= 0 && i >= best && i < best+bestLen {
			if i == best {
				sb.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			sb.WriteByte(':')
		}
		if i == 6 && best == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff)) {
			fmt.Fprintf(&sb, "%d.%d.%d.%d", g[12], g[13], g[14], g[15])
			return sb.String()
		}
		sb.WriteString(strconv.FormatUint(uint64(w[i]), 16))
	}
	if best >= 0 && best+bestLen == 8 {
		sb.WriteByte(':')
	}
	return sb.String()
}
