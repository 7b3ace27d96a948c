package uverbs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeContext returns a Context whose command fd is a memfd: every write()
// command lands in the file, byte for byte, and "succeeds" with an all-zero
// response. read returns what was written since the last read. The
// Context is closed when the test ends, and with it whatever the test
// created under it.
func fakeContext(t *testing.T) (c *Context, read func() []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("uverbs-golden", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatalf("memfd_create: %v", err)
	}
	// read uses a copy of the fd, which stays open past Context.Close.
	rd, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(rd) })
	var off int64
	read = func() []byte {
		t.Helper()
		end, err := unix.Seek(rd, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, end-off)
		if _, err := unix.Pread(rd, b, off); err != nil {
			t.Fatal(err)
		}
		off = end
		return b
	}
	c = &Context{fd: ownFD(fd, "memfd"), dev: Device{Name: "fake0"}}
	t.Cleanup(func() { c.Close() })
	return c, read
}

// unhex decodes a golden hex string; spaces and '|' only separate fields.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s))
	if err != nil {
		t.Fatalf("bad golden hex: %v", err)
	}
	return b
}

// maskResponse checks that the 8-byte response pointer at off is set, then
// zeroes it: its value is a stack address, the only byte range of a command
// that differs between runs.
func maskResponse(t *testing.T, b []byte, off int) []byte {
	t.Helper()
	if len(b) < off+8 {
		t.Fatalf("command of %d bytes has no response pointer at %d", len(b), off)
	}
	if binary.NativeEndian.Uint64(b[off:]) == 0 {
		t.Errorf("response pointer at %d is null", off)
	}
	clear(b[off : off+8])
	return b
}

func expectBytes(t *testing.T, verb string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s command bytes:\n got %x\nwant %x", verb, got, want)
	}
}

// The expected bytes are written out from the C layouts: struct
// ib_uverbs_cmd_hdr {u32 command; u16 in_words; u16 out_words} then the
// command struct, little-endian, with in_words/out_words counting 4-byte
// words of the whole request and of the response (libibverbs' legacy
// encoding, cmd_write.h / cmd_fallback.c _execute_cmd_write).
func TestGoldenWriteCommands(t *testing.T) {
	c, read := fakeContext(t)

	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "alloc_pd", maskResponse(t, read(), 8),
		unhex(t, "03000000 0400 0100 | 0000000000000000"))

	pd.handle = 5
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "dealloc_pd", read(), unhex(t, "04000000 0300 0000 | 05000000"))
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	if b := read(); len(b) != 0 {
		t.Errorf("second PD.Close sent %x", b)
	}

	// CQ with a 16-byte driver response (struct rxe_create_cq_resp).
	drv := make([]byte, 16)
	cq, err := c.CreateCQ(CQSpec{CQE: 256, Vector: 0, UserHandle: 0x1122334455667788}, drv)
	if err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "create_cq", maskResponse(t, read(), 8), unhex(t, `
		12000000 0a00 0600
		0000000000000000 | 8877665544332211 | 00010000 | 00000000 | ffffffff | 00000000`))

	cq.handle = 7
	if err := cq.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "req_notify_cq solicited", read(), unhex(t, "17000000 0400 0000 | 07000000 01000000"))
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "req_notify_cq all", read(), unhex(t, "17000000 0400 0000 | 07000000 00000000"))

	// The PD above is closed: its methods send nothing any more.
	pd, err = c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	read()
	pd.handle = 3
	qpDrv := make([]byte, 32) // struct rxe_create_qp_resp
	qp, err := pd.CreateQP(QPSpec{
		Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SigAll: true, UserHandle: 42,
		Cap: QPCap{MaxSendWR: 64, MaxRecvWR: 128, MaxSendSGE: 2, MaxRecvSGE: 3, MaxInlineData: 256},
	}, qpDrv)
	if err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "create_qp", maskResponse(t, read(), 8), unhex(t, `
		18000000 1000 1000
		0000000000000000 | 2a00000000000000 | 03000000 | 07000000 | 07000000 | 00000000
		40000000 | 80000000 | 02000000 | 03000000 | 00010000 | 01 02 00 00`))

	qp.handle = 9
	if err := qp.PostSendDoorbell(); err != nil {
		t.Fatal(err)
	}
	// librxe's post_send_db: wr_count = sge_count = 0, wqe_size =
	// sizeof(struct ibv_send_wr) = 128, out_words for a 4-byte response.
	expectBytes(t, "post_send doorbell", maskResponse(t, read(), 8), unhex(t, `
		1c000000 0800 0100
		0000000000000000 | 09000000 | 00000000 | 00000000 | 80000000`))

	if _, _, err := qp.Query(QPAttrState | QPAttrCap); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "query_qp", maskResponse(t, read(), 8), unhex(t, `
		19000000 0600 2000
		0000000000000000 | 09000000 | 01000800`))

	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "destroy_qp", maskResponse(t, read(), 8), unhex(t, `
		1b000000 0600 0100
		0000000000000000 | 09000000 | 00000000`))

	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "destroy_cq", maskResponse(t, read(), 8), unhex(t, `
		14000000 0600 0200
		0000000000000000 | 07000000 | 00000000`))

	if _, err := c.QueryPort(1); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "query_port", maskResponse(t, read(), 8), unhex(t, `
		02000000 0600 0a00
		0000000000000000 | 01 00000000000000`))
}

// The extended header (struct ib_uverbs_ex_cmd_hdr) carries the response
// pointer and counts 8-byte words of the core request and response only
// (cmd_fallback.c _execute_cmd_write_ex).
func TestGoldenQueryDeviceEx(t *testing.T) {
	c, read := fakeContext(t)
	if _, err := c.QueryDevice(); err != nil {
		t.Fatal(err)
	}
	// command = IB_USER_VERBS_CMD_FLAG_EXTENDED | QUERY_DEVICE, in_words =
	// 8/8, out_words = sizeof(struct ib_uverbs_ex_query_device_resp)/8 = 38.
	expectBytes(t, "query_device_ex", maskResponse(t, read(), 8), unhex(t, `
		01000080 0100 2600
		0000000000000000 | 0000 | 0000 | 00000000
		00000000 | 00000000`))
}

func TestGoldenRegMR(t *testing.T) {
	c, read := fakeContext(t)
	pd := &PD{ctx: c, handle: 2}
	b, err := NewBuffer(8192, BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mr, err := pd.RegisterMRRange(b, 4096, 100, AccessLocalWrite|AccessRemoteRead|AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	got := maskResponse(t, read(), 8)
	want := unhex(t, `
		09000000 0c00 0300
		0000000000000000 | 0000000000000000 | 6400000000000000 | 0000000000000000 | 02000000 | 07000000`)
	// start and hca_va are the registered address (buffer + 4096).
	binary.LittleEndian.PutUint64(want[16:], b.Addr()+4096)
	binary.LittleEndian.PutUint64(want[32:], b.Addr()+4096)
	expectBytes(t, "reg_mr", got, want)
	if mr.Addr() != b.Addr()+4096 || mr.Len() != 100 {
		t.Errorf("MR covers %#x+%d, want %#x+100", mr.Addr(), mr.Len(), b.Addr()+4096)
	}

	if err := b.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Buffer.Close with a live MR = %v, want EBUSY", err)
	}
	mr.handle = 11
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "dereg_mr", read(), unhex(t, "0d000000 0300 0000 | 0b000000"))
	if err := b.Close(); err != nil {
		t.Errorf("Buffer.Close after MR.Close: %v", err)
	}
}

// MODIFY_QP to RTR on RoCE: the address vector (struct ib_uverbs_qp_dest)
// carries is_global=1, the destination GID, sgid_index and hop_limit.
// Offsets below are those of struct ib_uverbs_modify_qp (after the 8-byte
// header).
func TestGoldenModifyQPRTR(t *testing.T) {
	c, read := fakeContext(t)
	qp := &QP{pd: &PD{ctx: c}, handle: 4}
	dgid := GID{15: 2, 10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0}
	attr := QPAttr{
		State: QPStateRTR, PathMTU: MTU1024, DestQPNum: 0x11, RQPSN: 0x123456,
		MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AH: AHAttr{IsGlobal: true, PortNum: 1, GRH: GlobalRoute{DGID: dgid, SGIDIndex: 1, HopLimit: 64}},
	}
	mask := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	if err := qp.Modify(&attr, mask); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 8+112)
	copy(want, unhex(t, "1a000000 1e00 0000")) // in_words = 120/4, no response
	body := want[8:]
	copy(body[0:], dgid[:])                                // dest.dgid
	body[24] = 1                                           // dest.sgid_index
	body[25] = 64                                          // dest.hop_limit
	body[30] = 1                                           // dest.is_global
	body[31] = 1                                           // dest.port_num
	binary.LittleEndian.PutUint32(body[64:], 4)            // qp_handle
	binary.LittleEndian.PutUint32(body[68:], uint32(mask)) // attr_mask
	binary.LittleEndian.PutUint32(body[76:], 0x123456)     // rq_psn
	binary.LittleEndian.PutUint32(body[84:], 0x11)         // dest_qp_num
	body[96] = 2                                           // qp_state RTR
	body[98] = 3                                           // path_mtu IB_MTU_1024
	body[102] = 1                                          // max_dest_rd_atomic
	body[103] = 12                                         // min_rnr_timer
	expectBytes(t, "modify_qp", read(), want)
	// IBV_QP_STATE|AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN
	// from libibverbs' enum ibv_qp_attr_mask.
	if mask != 0x129181 {
		t.Errorf("mask = %#x, want 0x129181", uint32(mask))
	}

	if err := qp.Modify(&attr, 1<<25); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Modify with a rate-limit mask = %v, want ErrNotSupported", err)
	}
	if b := read(); len(b) != 0 {
		t.Errorf("rejected Modify sent %x", b)
	}
}
