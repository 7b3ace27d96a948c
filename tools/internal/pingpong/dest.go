package pingpong

import (
	"encoding/binary"
	"fmt"

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
