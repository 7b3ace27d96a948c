package rsocket

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/cq"
	"golang.org/x/sys/unix"
)

// The connect data of an rsocket on x86: rs_format_conn_data's bytes for
// rq 384, iomap size 0, target list at 0x5566778899aa0000 (rkey 0x1234),
// ring at 0x7f0011223344 (rkey 0x1234), 128 KiB ring.
var cConnData = []byte{
	1, flagIOMap, 0x01, 0x80, 0, 0, 0, 0,
	0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 2,
	0, 0, 0x7f, 0, 0x11, 0x22, 0x33, 0x44, 0, 0, 0x12, 0x34, 0, 1, 0, 0,
}

func TestConnDataLayout(t *testing.T) {
	want := connData{
		Version: 1, Flags: flagIOMap, Credits: 384,
		TargetSGL: sge{Addr: 0x5566778899aa0000, Key: 0x1234, Length: 2},
		DataBuf:   sge{Addr: 0x7f0011223344, Key: 0x1234, Length: 64 << 10},
	}
	// The CM pads the REQ's private data to 56 bytes.
	got, err := parseConnData(append(cConnData[:40:40], make([]byte, 16)...))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(sge{})); d != "" {
		t.Errorf("parsed (-want +got):\n%s", d)
	}
	var b [connDataLen]byte
	want.marshal(b[:])
	if d := cmp.Diff(cConnData, b[:]); d != "" {
		t.Errorf("marshalled (-want +got):\n%s", d)
	}
}

func TestConnDataRefused(t *testing.T) {
	for name, mod := range map[string]func(b []byte) []byte{
		"short":       func(b []byte) []byte { return b[:39] },
		"version 2":   func(b []byte) []byte { b[0] = 2; return b },
		"one entry":   func(b []byte) []byte { b[23] = 1; return b },
		"no credits":  func(b []byte) []byte { b[2], b[3] = 0, 0; return b },
		"empty half":  func(b []byte) []byte { copy(b[36:], []byte{0, 0, 0, 0}); return b },
		"half > 2^29": func(b []byte) []byte { copy(b[36:], []byte{0x20, 0, 0, 0}); return b },
	} {
		_, err := parseConnData(mod(append([]byte(nil), cConnData...)))
		if !errors.Is(err, unix.EPROTO) {
			t.Errorf("%s: %v, want EPROTO", name, err)
		}
	}
}

func TestMessage(t *testing.T) {
	for _, tc := range []struct {
		op   uint8
		data uint32
		imm  uint32
	}{
		{opData, 4096, 0x00001000},
		{opSGL, 384 + 7, 0x80000187},
		{opIOMapSGL, 0, 0xC0000000},
		{opCtrl, ctrlShutdown, 0xE0000002},
		{opCtrl, ctrlDisconnect, 0xE0000000},
	} {
		if m := message(tc.op, tc.data); m != tc.imm || msgOp(m) != tc.op || msgData(m) != tc.data {
			t.Errorf("message(%d, %d) = %#x (op %d data %d), want %#x", tc.op, tc.data, m, msgOp(m), msgData(m), tc.imm)
		}
	}
}

func FuzzParseConnData(f *testing.F) {
	f.Add(cConnData)
	f.Add(make([]byte, 56))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseConnData(b)
		if err != nil {
			return
		}
		var out [connDataLen]byte
		c.marshal(out[:])
		again, err := parseConnData(out[:])
		if err != nil || again != c {
			t.Fatalf("round trip: %+v, %v; was %+v", again, err, c)
		}
	})
}

// fakeConn is a connection with no device behind it: enough for the
// receive path's bookkeeping.
func fakeConn(rq, rbuf int) *Conn {
	r := &res{sq: 16, rq: rq, rbufLen: rbuf, sbufLen: 16 << 10}
	r.iomapSize = 2
	r.layout()
	r.mem = make([]byte, r.sbufOff+r.sbufLen+ctrlLen)
	c := newConn(r)
	c.state = stConnected | stReadable | stWritable
	return c
}

// FuzzReceive feeds arbitrary immediates (with arbitrary write lengths)
// to the receive path, reading in between: a peer's messages may fail
// the connection, never panic or queue more than the ring and credits
// allow.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{0, 0, 0x10, 0, 0, 0, 0x10, 0, 0x80, 0, 1, 0x87, 0, 0, 0, 16})
	f.Add([]byte{0xE0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := fakeConn(16, 16<<10)
		buf := make([]byte, 3000)
		for len(b) >= 8 {
			wc := cq.WC{WRID: recvID, Flags: cq.WithImm, Imm: binary.BigEndian.Uint32(b), ByteLen: binary.BigEndian.Uint32(b[4:])}
			b = b[8:]
			c.received(&wc)
			queued := 0
			for i := c.rmsgHead; i != c.rmsgTail; i = (i + 1) % len(c.rmsg) {
				queued++
				if c.rmsg[i] == 0 || int(c.rmsg[i]) > c.r.rbufLen {
					t.Fatalf("queued a %d-byte message", c.rmsg[i])
				}
			}
			if queued > c.r.rq {
				t.Fatalf("%d messages queued with %d credits", queued, c.r.rq)
			}
			if wc.Imm&1 != 0 {
				c.copyOut(buf[:int(wc.ByteLen%3000)])
			}
		}
	})
}

// A data message beyond the credits fails the connection with EPROTO.
func TestReceiveBeyondCredits(t *testing.T) {
	c := fakeConn(16, 16<<10)
	for range 16 {
		c.received(&cq.WC{WRID: recvID, Flags: cq.WithImm, Imm: message(opData, 10), ByteLen: 10})
	}
	if c.err != nil {
		t.Fatalf("within the credits: %v", c.err)
	}
	c.received(&cq.WC{WRID: recvID, Flags: cq.WithImm, Imm: message(opData, 10), ByteLen: 10})
	if !errors.Is(c.err, unix.EPROTO) {
		t.Fatalf("the 17th message: %v, want EPROTO", c.err)
	}
}

// SGL updates: an entry-carrying one copies the target list entry the
// peer wrote, alternating; a credit-only one only moves the credits.
func TestReceiveSGL(t *testing.T) {
	c := fakeConn(16, 16<<10)
	c.target[0] = sge{Addr: 0x1000, Key: 9, Length: 8 << 10}
	putSGE(c.r.targetList()[16:], sge{Addr: 0x3000, Key: 9, Length: 8 << 10}, binary.LittleEndian)
	c.received(&cq.WC{WRID: recvID, Flags: cq.WithImm, Imm: message(opSGL, 16), ByteLen: 16})
	if c.target[1] != (sge{Addr: 0x3000, Key: 9, Length: 8 << 10}) || c.sseqComp != 16 || c.targetFill != 0 {
		t.Fatalf("after an SGL update: target %+v, sseqComp %d, fill %d", c.target, c.sseqComp, c.targetFill)
	}
	c.received(&cq.WC{WRID: recvID, Flags: cq.WithImm, Imm: message(opSGL, 24), ByteLen: 0})
	if c.target[0].Addr != 0x1000 || c.sseqComp != 24 || c.targetFill != 0 {
		t.Fatalf("after a credit update: target %+v, sseqComp %d, fill %d", c.target, c.sseqComp, c.targetFill)
	}
}
