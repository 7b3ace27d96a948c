package qp

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/rxe/rxesim"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// openSimQP is an open RC QP in RTS over the simulator's rings.
func openSimQP(t *testing.T) *QP {
	t.Helper()
	dev := rxesim.New()
	c, err := dev.NewCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := simQP(t, dev, c, rxesim.QPSpec{Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	return q
}

func TestPeerRecord(t *testing.T) {
	p := Peer{LID: 0, QPN: 0x11, PSN: 0xabcdef, GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}}
	text, err := p.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	// What ibv_rc_pingpong sends for the same values (its "%04x:%06x:%06x:%s").
	const want = "0000:000011:abcdef:00000000000000000000ffff0a630001"
	if string(text) != want || len(text)+1 != PeerRecordLen {
		t.Fatalf("MarshalText = %q (%d bytes), want %q (+NUL = %d)", text, len(text), want, PeerRecordLen)
	}
	var back Peer
	if err := back.UnmarshalText(append(text, 0, 'x')); err != nil || back != p {
		t.Fatalf("UnmarshalText(record) = %+v, %v; want %+v", back, err, p)
	}
	// sscanf's %x takes any width.
	if err := back.UnmarshalText([]byte("1:2:3:00000000000000000000ffff0a630001")); err != nil || back.LID != 1 || back.QPN != 2 || back.PSN != 3 {
		t.Fatalf("short numbers: %+v, %v", back, err)
	}
	for _, bad := range []string{"", "garbage", "0000:000011:abcdef", "0000:1000000:0:00000000000000000000ffff0a630001",
		"0000:000011:abcdef:00000000000000000000ffff0a63000", "0000:000011:abcdef:zz000000000000000000ffff0a630001"} {
		if err := back.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) accepted it", bad)
		}
	}
}

// Connect refuses what would hang or mis-address before it touches the
// device (the zero QP here has none).
func TestConnectRefusesBeforeTouchingTheDevice(t *testing.T) {
	gid := uverbs.GID{15: 1}
	for name, c := range map[string]struct {
		peer Peer
		o    ConnectOptions
	}{
		"retry 7":       {Peer{QPN: 1, GID: gid}, ConnectOptions{RetryCnt: 7}},
		"wide QPN":      {Peer{QPN: 1 << 24, GID: gid}, ConnectOptions{}},
		"wide send PSN": {Peer{QPN: 1, GID: gid}, ConnectOptions{SendPSN: 1 << 24}},
		"zero peer GID": {Peer{QPN: 1}, ConnectOptions{}},
	} {
		q := openSimQP(t)
		q.state.Store(uint32(StateReset))
		if err := q.Connect(c.peer, c.o); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", name, err)
		}
	}
	q := openSimQP(t)
	if err := q.Connect(Peer{QPN: 1, GID: gid}, ConnectOptions{}); !errors.Is(err, ErrBadState) {
		t.Errorf("from RTS: %v, want ErrBadState", err)
	}
}
