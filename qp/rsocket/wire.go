package rsocket

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// The wire of librdmacm's rsocket (rdma-core librdmacm/rsocket.c): what
// travels in the connect private data, in the 32-bit immediate of every
// RDMA WRITE_WITH_IMM, and in the 16-byte buffer descriptors one side writes
// into the other's target list.

// Message operations, the immediate's top three bits.
const (
	opData     = 0 // payload: bytes written into the ring
	opSGL      = 4 // payload: the peer's new credit limit; maybe a ring half
	opIOMapSGL = 6 // payload: an iomap index (the peer wrote an iomap entry)
	opCtrl     = 7 // payload: ctrlDisconnect or ctrlShutdown
)

// Control message payloads (op 7); a keepalive is never sent as an
// immediate, it tags the local completion of an empty RDMA WRITE.
const (
	ctrlDisconnect = 0
	ctrlKeepalive  = 1
	ctrlShutdown   = 2
)

const (
	msgDataMask = 1<<29 - 1
	// connDataLen is the size of struct rs_conn_data.
	connDataLen = 40
	// sgeLen is the size of struct rs_sge {addr u64, key u32, length u32}.
	sgeLen = 16
	// targetSGEs is how many entries the target list has: one per ring half.
	targetSGEs = 2
	// connVersion is the only version rsocket accepts.
	connVersion = 1
	// Connect-data flags.
	flagNet   = 1 // the sender is big-endian: its SGL entries are too
	flagIOMap = 2 // the sender's target list is followed by an iomap table
)

// message builds an immediate: op in the top three bits, data below.
func message(op uint8, data uint32) uint32 { return uint32(op)<<29 | data&msgDataMask }

// msgOp and msgData split an immediate.
func msgOp(m uint32) uint8    { return uint8(m >> 29) }
func msgData(m uint32) uint32 { return m & msgDataMask }

// sge is rsocket's buffer descriptor (struct rs_sge).
type sge struct {
	Addr   uint64
	Key    uint32
	Length uint32
}

// connData is struct rs_conn_data: what each side tells the other in the
// connect REQ or the REP. All of it is big-endian on the wire.
type connData struct {
	Version uint8
	Flags   uint8
	// Credits is the sender's receive queue size: how many data messages
	// it can take before it grants more.
	Credits uint16
	// IOMapScale is the iomap table size, scaled (≤128 verbatim, else
	// 0x80|size>>8).
	IOMapScale uint8
	// TargetSGL is where the sender's target list lives; its Length is the
	// number of entries (2).
	TargetSGL sge
	// DataBuf is the first half of the sender's receive ring.
	DataBuf sge
}

// marshal writes c into b, which holds at least connDataLen bytes.
func (c *connData) marshal(b []byte) {
	_ = b[connDataLen-1]
	b[0] = c.Version
	b[1] = c.Flags
	binary.BigEndian.PutUint16(b[2:], c.Credits)
	b[4], b[5], b[6] = 0, 0, 0
	b[7] = c.IOMapScale
	putSGE(b[8:], c.TargetSGL, binary.BigEndian)
	putSGE(b[24:], c.DataBuf, binary.BigEndian)
}

// parseConnData decodes the peer's private data (the CM delivers it
// padded to the message's full size) and checks what a peer must get
// right: the version, a two-entry target list, a ring half no larger
// than the immediate can describe, and at least one credit.
func parseConnData(b []byte) (connData, error) {
	var c connData
	if len(b) < connDataLen {
		return c, fmt.Errorf("rsocket: connect data of %d bytes, want %d: %w", len(b), connDataLen, unix.EPROTO)
	}
	c.Version = b[0]
	c.Flags = b[1]
	c.Credits = binary.BigEndian.Uint16(b[2:])
	c.IOMapScale = b[7]
	c.TargetSGL = getSGE(b[8:], binary.BigEndian)
	c.DataBuf = getSGE(b[24:], binary.BigEndian)
	switch {
	case c.Version != connVersion:
		return c, fmt.Errorf("rsocket: connect data version %d, want %d: %w", c.Version, connVersion, unix.EPROTO)
	case c.TargetSGL.Length != targetSGEs:
		return c, fmt.Errorf("rsocket: peer target list of %d entries, want %d: %w", c.TargetSGL.Length, targetSGEs, unix.EPROTO)
	case c.Credits == 0:
		return c, fmt.Errorf("rsocket: peer grants no credits: %w", unix.EPROTO)
	case c.DataBuf.Length == 0 || c.DataBuf.Length > msgDataMask:
		return c, fmt.Errorf("rsocket: peer ring half of %d bytes: %w", c.DataBuf.Length, unix.EPROTO)
	}
	return c, nil
}

// sgeOrder is the byte order of the SGL entries a side writes into its
// peer's target list: the receiver's host order, which the connect data's
// flagNet announces. This package always announces little-endian.
func sgeOrder(peerFlags uint8) binary.ByteOrder {
	if peerFlags&flagNet != 0 {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

func putSGE(b []byte, s sge, o binary.ByteOrder) {
	_ = b[sgeLen-1]
	o.PutUint64(b[0:], s.Addr)
	o.PutUint32(b[8:], s.Key)
	o.PutUint32(b[12:], s.Length)
}

func getSGE(b []byte, o binary.ByteOrder) sge {
	_ = b[sgeLen-1]
	return sge{Addr: o.Uint64(b[0:]), Key: o.Uint32(b[8:]), Length: o.Uint32(b[12:])}
}
