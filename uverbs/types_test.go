package uverbs

import (
	"errors"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

func TestGID(t *testing.T) {
	v4 := GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}
	if s := v4.String(); s != "::ffff:10.99.0.1" {
		t.Errorf("String = %q", s)
	}
	if ip := v4.To4(); !ip.Equal(net.IPv4(10, 99, 0, 1)) {
		t.Errorf("To4 = %v", ip)
	}
	ll := GID{0: 0xfe, 1: 0x80, 15: 1}
	if ll.To4() != nil || ll.String() != "fe80::1" {
		t.Errorf("link-local GID: To4 %v, String %q", ll.To4(), ll.String())
	}
	if !(GID{}).IsZero() || v4.IsZero() {
		t.Error("IsZero wrong")
	}
	if GIDTypeRoCEv2.String() != "RoCE v2" || GIDTypeIB.String() != "IB" {
		t.Error("GIDType names")
	}
}

func TestEnums(t *testing.T) {
	for m, want := range map[MTU]int{MTU256: 256, MTU512: 512, MTU1024: 1024, MTU2048: 2048, MTU4096: 4096, 0: 0, 6: 0} {
		if m.Bytes() != want {
			t.Errorf("MTU(%d).Bytes = %d, want %d", m, m.Bytes(), want)
		}
	}
	if MTU1024.String() != "1024" || PortActive.String() != "ACTIVE" || QPStateRTS.String() != "RTS" || QPTypeRC.String() != "RC" {
		t.Error("enum names")
	}
	if s := (AccessLocalWrite | AccessRemoteRead | 1<<9).String(); s != "LocalWrite|RemoteRead|0x200" {
		t.Errorf("Access string %q", s)
	}
}

func TestErrors(t *testing.T) {
	err := error(&Error{Verb: "create_cq", Errno: unix.EINVAL})
	if !errors.Is(err, unix.EINVAL) || err.Error() != "uverbs: create_cq: invalid argument" {
		t.Errorf("Error %q does not wrap EINVAL", err)
	}
	if err := checkMRAccess(AccessRemoteWrite); !errors.Is(err, unix.EINVAL) {
		t.Errorf("remote write without local write = %v", err)
	}
	if err := checkMRAccess(AccessLocalWrite | AccessRemoteWrite | AccessRemoteAtomic); err != nil {
		t.Errorf("valid access refused: %v", err)
	}
	if err := checkDriverData("x", make([]byte, maxDriverData+4), 0, 4); !errors.Is(err, ErrNotSupported) {
		t.Errorf("oversized driver data = %v", err)
	}
	if err := checkDriverData("x", nil, 6, 4); err == nil {
		t.Error("unaligned driver data accepted")
	}
}

func TestDecoders(t *testing.T) {
	var r exQueryDeviceResp
	r.Base.NodeGUID = be64(0x0250b6fffe000001) // the kernel stores __be64
	r.Base.MaxCQE = 32767
	r.Base.PhysPortCnt = 1
	r.Base.DeviceCapFlags = 1 << 12
	r.DeviceCapFlagsEx = 1 << 34
	d := deviceAttrFrom(&r)
	if d.NodeGUID != 0x0250b6fffe000001 || d.MaxCQE != 32767 || d.PhysPortCnt != 1 || d.DeviceCapFlags != 1<<12|1<<34 {
		t.Errorf("device attr %+v", d)
	}

	p := portAttrFrom(&queryPortResp{State: 4, ActiveMTU: 3, MaxMTU: 5, GIDTblLen: 1024, LinkLayer: 2, Flags: 1})
	if p.State != PortActive || p.ActiveMTU != MTU1024 || p.MaxMTU != MTU4096 || p.GIDTableLen != 1024 ||
		p.LinkLayer != LinkLayerEthernet || !p.GRHRequired {
		t.Errorf("port attr %+v", p)
	}

	// What MODIFY_QP sends, QUERY_QP reads back the same way.
	attr := QPAttr{
		State: QPStateRTS, PathMTU: MTU2048, QKey: 5, RQPSN: 6, SQPSN: 7, DestQPNum: 8,
		AccessFlags: AccessRemoteWrite | AccessLocalWrite, PKeyIndex: 1, MaxRdAtomic: 2, MaxDestRdAtomic: 3,
		MinRNRTimer: 12, PortNum: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 6,
		AH: AHAttr{IsGlobal: true, PortNum: 1, SL: 3, GRH: GlobalRoute{DGID: GID{0: 0xfe, 15: 9}, FlowLabel: 77, SGIDIndex: 1, HopLimit: 64, TrafficClass: 8}},
	}
	m := modifyQPFrom(1, &attr, QPAttrState)
	q := queryQPResp{
		Dest: m.Dest, AltDest: m.AltDest, QKey: m.QKey, RQPSN: m.RQPSN, SQPSN: m.SQPSN, DestQPNum: m.DestQPNum,
		QPAccessFlags: m.QPAccessFlags, PKeyIndex: m.PKeyIndex, QPState: m.QPState, PathMTU: m.PathMTU,
		MaxRdAtomic: m.MaxRdAtomic, MaxDestRdAtomic: m.MaxDestRdAtomic, MinRNRTimer: m.MinRNRTimer,
		PortNum: m.PortNum, Timeout: m.Timeout, RetryCnt: m.RetryCnt, RNRRetry: m.RNRRetry,
	}
	if got := qpAttrFrom(&q); got != attr {
		t.Errorf("QP attr round trip:\n got %+v\nwant %+v", got, attr)
	}
}
