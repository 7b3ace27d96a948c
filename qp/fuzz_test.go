package qp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"golang.org/x/sys/unix"
)

// FuzzPeerUnmarshalText feeds arbitrary records, as a peer may send them:
// a record is either refused with an error or parsed into a Peer that
// formats back into a record parsing to the same Peer, within
// PeerRecordLen.
func FuzzPeerUnmarshalText(f *testing.F) {
	f.Add([]byte("0000:00abcd:012345:00000000000000000000ffff0a630001\x00"))
	f.Add([]byte("1:2:3:fe800000000000000000000000000001"))
	f.Add([]byte("ffff:ffffff:ffffff:ffffffffffffffffffffffffffffffff"))
	f.Add([]byte("::::"))
	f.Fuzz(func(t *testing.T, rec []byte) {
		var p Peer
		if err := p.UnmarshalText(rec); err != nil {
			return
		}
		if p.QPN > 0xffffff || p.PSN > 0xffffff {
			t.Fatalf("%q parsed to %+v: QPN or PSN over 24 bits", rec, p)
		}
		text, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		if len(text)+1 != PeerRecordLen {
			t.Fatalf("%+v formats to %d bytes, want %d", p, len(text), PeerRecordLen-1)
		}
		var q Peer
		if err := q.UnmarshalText(text); err != nil || q != p {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", rec, p, text, q, err)
		}
	})
}

// FuzzParseDatagram feeds arbitrary receive buffers and completion fields:
// a datagram is either refused with an EINVAL error or its payload lies
// within the buffer, right after the GRH, and as long as the completion
// says.
func FuzzParseDatagram(f *testing.F) {
	v4 := make([]byte, GRHLen+8)
	copy(v4[20:], []byte{0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 99, 0, 1, 10, 99, 0, 2})
	f.Add(v4, uint32(len(v4)), uint32(cq.GRH))
	v6 := make([]byte, GRHLen+4)
	v6[0] = 0x60
	f.Add(v6, uint32(len(v6)), uint32(cq.GRH))
	f.Add([]byte{1, 2, 3}, uint32(3), uint32(0))
	f.Fuzz(func(t *testing.T, buf []byte, byteLen, flags uint32) {
		wc := cq.WC{ByteLen: byteLen, Flags: cq.WCFlags(flags), SrcQP: 7}
		d, err := ParseDatagram(&wc, buf)
		if err != nil {
			if !errors.Is(err, unix.EINVAL) || !(errors.Is(err, ErrNoGRH) || errors.Is(err, ErrBadGRH)) {
				t.Fatalf("error %v is not ErrNoGRH/ErrBadGRH (EINVAL)", err)
			}
			return
		}
		if len(d.Payload) != int(byteLen)-GRHLen || !bytes.Equal(d.Payload, buf[GRHLen:byteLen]) {
			t.Fatalf("payload of %d bytes for byte_len %d in a %d-byte buffer", len(d.Payload), byteLen, len(buf))
		}
		if d.SrcQP != 7 || (d.GRH.Version != 4 && d.GRH.Version != 6) {
			t.Fatalf("datagram %+v", d)
		}
	})
}
