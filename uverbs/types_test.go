package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"unsafe"

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
	if s := (AccessLocalWrite | AccessRemoteRead | AccessFlushPersistent | 1<<12).String(); s != "LocalWrite|RemoteRead|FlushPersistent|0x1000" {
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

// kernelBytes is the memory of v, as the kernel reads or writes it.
func kernelBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// put stores v, n bytes wide in native byte order (the kernel's), at off.
func put(b []byte, off, n int, v uint64) {
	switch n {
	case 1:
		b[off] = byte(v)
	case 2:
		binary.NativeEndian.PutUint16(b[off:], uint16(v))
	case 4:
		binary.NativeEndian.PutUint32(b[off:], uint32(v))
	default:
		panic(n)
	}
}

func TestDecoders(t *testing.T) {
	var r exQueryDeviceResp
	// The kernel stores node_guid as __be64: the bytes in wire order.
	binary.BigEndian.PutUint64(kernelBytes(&r.Base.NodeGUID), 0x0250b6fffe000001)
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
}

// qpAttrSample has a different value in every field, so that a field
// mapped to the wrong place shows.
func qpAttrSample() QPAttr {
	var dgid, altDGID GID
	for i := range dgid {
		dgid[i], altDGID[i] = 0xd0+byte(i), 0xe0+byte(i)
	}
	return QPAttr{
		State: 0x21, CurState: 0x22, PathMTU: 0x23, PathMigState: 0x24,
		QKey: 0x41000001, RQPSN: 0x41000002, SQPSN: 0x41000003, DestQPNum: 0x41000004, AccessFlags: 0x41000005,
		PKeyIndex: 0x3101, AltPKeyIndex: 0x3102,
		MaxRdAtomic: 0x25, MaxDestRdAtomic: 0x26, MinRNRTimer: 0x27, PortNum: 0x28, Timeout: 0x29,
		RetryCnt: 0x2a, RNRRetry: 0x2b, AltPortNum: 0x2c, AltTimeout: 0x2d,
		AH: AHAttr{GRH: GlobalRoute{DGID: dgid, FlowLabel: 0x41000006, SGIDIndex: 0x2e, HopLimit: 0x2f, TrafficClass: 0x30},
			DLID: 0x3103, SL: 0x31, SrcPathBits: 0x32, StaticRate: 0x33, IsGlobal: true, PortNum: 0x34},
		AltAH: AHAttr{GRH: GlobalRoute{DGID: altDGID, FlowLabel: 0x41000007, SGIDIndex: 0x35, HopLimit: 0x36, TrafficClass: 0x37},
			DLID: 0x3104, SL: 0x38, SrcPathBits: 0x39, StaticRate: 0x3a, PortNum: 0x3b},
	}
}

// putDest writes a's struct ib_uverbs_qp_dest at off, by the header's
// offsets (dgid 0, flow_label 16, dlid 20, sgid_index 24, hop_limit 25,
// traffic_class 26, sl 27, src_path_bits 28, static_rate 29, is_global 30,
// port_num 31; gcc over <rdma/ib_user_verbs.h>, as in abi_test.go).
func putDest(b []byte, off int, a AHAttr) {
	copy(b[off:], a.GRH.DGID[:])
	put(b, off+16, 4, uint64(a.GRH.FlowLabel))
	put(b, off+20, 2, uint64(a.DLID))
	for i, v := range []uint8{a.GRH.SGIDIndex, a.GRH.HopLimit, a.GRH.TrafficClass, a.SL, a.SrcPathBits, a.StaticRate, b2u8(a.IsGlobal), a.PortNum} {
		b[off+24+i] = v
	}
}

// MODIFY_QP's bytes are checked against struct ib_uverbs_modify_qp as the
// header lays it out (offsets from gcc, as in abi_test.go), not against
// the decoder, which could carry the same swap.
func TestModifyQPEncoding(t *testing.T) {
	attr := qpAttrSample()
	attr.EnSQDAsyncNotify = true
	m := modifyQPFrom(0x41000009, &attr, 0x41000008)
	want := make([]byte, 112)
	putDest(want, 0, attr.AH)
	putDest(want, 32, attr.AltAH)
	for _, f := range []struct {
		off, n int
		v      uint64
	}{
		{64, 4, 0x41000009}, {68, 4, 0x41000008}, // qp_handle, attr_mask
		{72, 4, 0x41000001}, {76, 4, 0x41000002}, {80, 4, 0x41000003}, {84, 4, 0x41000004}, {88, 4, 0x41000005}, // qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags
		{92, 2, 0x3101}, {94, 2, 0x3102}, // pkey_index, alt_pkey_index
		{96, 1, 0x21}, {97, 1, 0x22}, {98, 1, 0x23}, {99, 1, 0x24}, {100, 1, 1}, // qp_state, cur_qp_state, path_mtu, path_mig_state, en_sqd_async_notify
		{101, 1, 0x25}, {102, 1, 0x26}, {103, 1, 0x27}, {104, 1, 0x28}, {105, 1, 0x29}, // max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout
		{106, 1, 0x2a}, {107, 1, 0x2b}, {108, 1, 0x2c}, {109, 1, 0x2d}, // retry_cnt, rnr_retry, alt_port_num, alt_timeout
	} {
		put(want, f.off, f.n, f.v)
	}
	if got := kernelBytes(&m); !bytes.Equal(got, want) {
		t.Errorf("modify_qp bytes:\n got %x\nwant %x", got, want)
	}
}

// QUERY_QP's answer is decoded from bytes laid out as struct
// ib_uverbs_query_qp_resp (offsets from gcc, as in abi_test.go).
func TestQueryQPDecoding(t *testing.T) {
	want := qpAttrSample()
	want.Cap = QPCap{MaxSendWR: 0x42000001, MaxRecvWR: 0x42000002, MaxSendSGE: 0x42000003, MaxRecvSGE: 0x42000004, MaxInlineData: 0x42000005}
	want.SQDraining = true
	var r queryQPResp
	b := kernelBytes(&r)
	putDest(b, 0, want.AH)
	putDest(b, 32, want.AltAH)
	for _, f := range []struct {
		off, n int
		v      uint64
	}{
		{64, 4, 0x42000001}, {68, 4, 0x42000002}, {72, 4, 0x42000003}, {76, 4, 0x42000004}, {80, 4, 0x42000005}, // max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data
		{84, 4, 0x41000001}, {88, 4, 0x41000002}, {92, 4, 0x41000003}, {96, 4, 0x41000004}, {100, 4, 0x41000005}, // qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags
		{104, 2, 0x3101}, {106, 2, 0x3102}, // pkey_index, alt_pkey_index
		{108, 1, 0x21}, {109, 1, 0x22}, {110, 1, 0x23}, {111, 1, 0x24}, {112, 1, 1}, // qp_state, cur_qp_state, path_mtu, path_mig_state, sq_draining
		{113, 1, 0x25}, {114, 1, 0x26}, {115, 1, 0x27}, {116, 1, 0x28}, {117, 1, 0x29}, // max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout
		{118, 1, 0x2a}, {119, 1, 0x2b}, {120, 1, 0x2c}, {121, 1, 0x2d}, // retry_cnt, rnr_retry, alt_port_num, alt_timeout
	} {
		put(b, f.off, f.n, f.v)
	}
	if got := qpAttrFrom(&r); got != want {
		t.Errorf("query_qp decoded:\n got %+v\nwant %+v", got, want)
	}
}
