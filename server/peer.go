package server

import "github.com/pureverbs/pureverbs/qp"

// doneMsg is the client's last word after it read the server's record.
var doneMsg = []byte("done\x00")

// record is p's wire form in the side channel: its text (qp.Peer's
// MarshalText, rdma-core's pingpong format) and a NUL, qp.PeerRecordLen
// bytes.
func record(p qp.Peer) []byte {
	b, _ := p.MarshalText()
	return append(b, 0)
}
