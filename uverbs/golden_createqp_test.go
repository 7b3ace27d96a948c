package uverbs

import (
	"bytes"
	"testing"
)

// UVERBS_METHOD_QP_CREATE (object 4, method 0) as ibv_icmd_create_qp in
// libibverbs 44 builds it for librxe's RC QP: PD_HANDLE (2), SEND_CQ (4) and
// RECV_CQ (5) as IDR attributes with the handles inline, HANDLE (0, new
// object, data 0), TYPE (9, const u64 inline), USER_HANDLE (7, u64 inline),
// CAP (8, the 20-byte struct ib_uverbs_qp_cap by pointer), EVENT_FD (12,
// the async fd), FLAGS (10, u32 IB_UVERBS_QP_CREATE_SQ_SIG_ALL = 0x1000, only
// when set), RESP_CAP (13, the same 20-byte struct, out), RESP_QP_NUM (14,
// u32 out), then librxe's 32-byte struct rxe_create_qp_resp as UHW_OUT
// (0x1001). Every attribute is mandatory; RDMA_DRIVER_RXE = 14.
func TestGoldenCreateQPIoctl(t *testing.T) {
	const rxe = 14
	var (
		cp  = QPCap{MaxSendWR: 1, MaxRecvWR: 2, MaxSendSGE: 3, MaxRecvSGE: 4, MaxInlineData: 5}
		qpn uint32
	)
	drv := make([]byte, 32)
	attr := QPSpec{Type: QPTypeRC, SendCQ: &CQ{handle: 3}, RecvCQ: &CQ{handle: 4}, SigAll: true, UserHandle: 0x1122334455667788}
	b, handle := createQPIoctl(uint32(DriverRXE), 6, attr, 20, &cp, &qpn, drv)
	defer b.pin.Unpin()
	if handle != &b.attrs[3] {
		t.Errorf("handle attribute is not the fourth one")
	}
	var want []byte
	want = append(want, hdrBytes(24+12*16, 4, 0, 12, rxe)...)
	want = append(want, attrBytes(2, 0, 1, 6)...)
	want = append(want, attrBytes(4, 0, 1, 3)...)
	want = append(want, attrBytes(5, 0, 1, 4)...)
	want = append(want, attrBytes(0, 0, 1, 0)...)
	want = append(want, attrBytes(9, 8, 1, 2)...) // IBV_QPT_RC
	want = append(want, attrBytes(7, 8, 1, 0x1122334455667788)...)
	want = append(want, attrBytes(8, 20, 1, ptrData(&cp))...)
	want = append(want, attrBytes(12, 0, 1, 20)...)
	want = append(want, attrBytes(10, 4, 1, 0x1000)...)
	want = append(want, attrBytes(13, 20, 1, ptrData(&cp))...)
	want = append(want, attrBytes(14, 4, 1, ptrData(&qpn))...)
	want = append(want, attrBytes(0x1001, 32, 1, ptrData(&drv[0]))...)
	expectBytes(t, "create_qp", b.bytes(), want)

	// Without SigAll there are no flags; without an async fd or driver
	// data those attributes are left out too.
	attr.SigAll = false
	b, _ = createQPIoctl(uint32(DriverRXE), 6, attr, -1, &cp, &qpn, nil)
	defer b.pin.Unpin()
	want = append([]byte(nil), hdrBytes(24+9*16, 4, 0, 9, rxe)...)
	want = append(want, attrBytes(2, 0, 1, 6)...)
	want = append(want, attrBytes(4, 0, 1, 3)...)
	want = append(want, attrBytes(5, 0, 1, 4)...)
	want = append(want, attrBytes(0, 0, 1, 0)...)
	want = append(want, attrBytes(9, 8, 1, 2)...)
	want = append(want, attrBytes(7, 8, 1, 0x1122334455667788)...)
	want = append(want, attrBytes(8, 20, 1, ptrData(&cp))...)
	want = append(want, attrBytes(13, 20, 1, ptrData(&cp))...)
	want = append(want, attrBytes(14, 4, 1, ptrData(&qpn))...)
	expectBytes(t, "create_qp minimal", b.bytes(), want)
}

// When the ioctl answers ENOTTY, create_qp sends exactly the write()
// command it sends without a driver id.
func TestCreateQPFallbackToWrite(t *testing.T) {
	attr := QPSpec{Type: QPTypeRC, SendCQ: &CQ{handle: 3}, RecvCQ: &CQ{handle: 4}, SigAll: true, UserHandle: 0x1122334455667788,
		Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 2, MaxSendSGE: 3, MaxRecvSGE: 4, MaxInlineData: 5}}
	var cmds [2][]byte
	for i, id := range []DriverID{DriverUnknown, DriverRXE} {
		c, read := fakeContext(t)
		c.driverID = id
		if _, err := (&PD{ctx: c, handle: 6}).CreateQP(attr, make([]byte, 32)); err != nil {
			t.Fatalf("driver %v: %v", id, err)
		}
		cmds[i] = maskResponse(t, read(), 8)
		if id == DriverRXE && c.noIoctl.Load() != ^uint32(0) {
			t.Errorf("after ENOTTY noIoctl = %#x, want every method", c.noIoctl.Load())
		}
	}
	if len(cmds[0]) < 8 || cmds[0][0] != 0x18 || !bytes.Equal(cmds[0], cmds[1]) {
		t.Errorf("create_qp write() without driver id:\n%x\nafter the ioctl's ENOTTY:\n%x", cmds[0], cmds[1])
	}
}
