package uverbs

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ptrData is the attribute data of a pointer attribute: the address.
func ptrData[T any](p *T) uint64 { return uint64(uintptr(unsafe.Pointer(p))) }

// The destroy methods as libibverbs 44 builds them (cmd_cq.c, cmd_qp.c,
// cmd_mr.c, cmd_pd.c): ids from <rdma/ib_user_ioctl_cmds.h>
// (UVERBS_OBJECT_PD = 1, CQ = 3, QP = 4, MR = 7; the CQ/QP/MR destroy
// methods are 1, PD's is 0; the handle attribute is 0, the response 1), an
// IDR attribute with no length and the handle inline, every attribute
// mandatory, and RDMA_DRIVER_RXE = 14 in the header.
func TestGoldenDestroyIoctls(t *testing.T) {
	const rxe = 14
	var cqResp destroyCQResp
	b := destroyCQIoctl(uint32(DriverRXE), 7, &cqResp)
	defer b.pin.Unpin()
	var want []byte
	want = append(want, hdrBytes(24+2*16, 3, 1, 2, rxe)...)
	want = append(want, attrBytes(1, 8, 1, ptrData(&cqResp))...)
	want = append(want, attrBytes(0, 0, 1, 7)...)
	expectBytes(t, "destroy_cq", b.bytes(), want)

	var qpResp destroyQPResp
	b = destroyQPIoctl(uint32(DriverRXE), 9, &qpResp)
	defer b.pin.Unpin()
	want = append([]byte(nil), hdrBytes(24+2*16, 4, 1, 2, rxe)...)
	want = append(want, attrBytes(1, 4, 1, ptrData(&qpResp))...)
	want = append(want, attrBytes(0, 0, 1, 9)...)
	expectBytes(t, "destroy_qp", b.bytes(), want)

	want = append(hdrBytes(24+16, 7, 1, 1, rxe), attrBytes(0, 0, 1, 11)...)
	expectBytes(t, "dereg_mr", deregMRIoctl(uint32(DriverRXE), 11).bytes(), want)

	want = append(hdrBytes(24+16, 1, 0, 1, rxe), attrBytes(0, 0, 1, 5)...)
	expectBytes(t, "dealloc_pd", deallocPDIoctl(uint32(DriverRXE), 5).bytes(), want)
}

// UVERBS_METHOD_CQ_CREATE (object 3, method 0) as ibv_icmd_create_cq builds
// it for librxe: HANDLE (0, new object, data 0), RESP_CQE (6, u32 out), CQE
// (1, u32 inline), USER_HANDLE (2, u64 inline), COMP_CHANNEL (3, fd, only
// with a channel), COMP_VECTOR (4, u32 inline), EVENT_FD (7, the context's
// async fd, optional: flags 0), then the driver response as UHW_OUT
// (0x1001, librxe's 16-byte struct rxe_create_cq_resp).
func TestGoldenCreateCQIoctl(t *testing.T) {
	const rxe = 14
	var cqe uint32
	drv := make([]byte, 16)
	attr := CQSpec{CQE: 256, Vector: 2, UserHandle: 0x1122334455667788, Channel: &CompChannel{fd: &fileDesc{raw: 21}}}
	b, handle := createCQIoctl(uint32(DriverRXE), attr, 20, &cqe, drv)
	defer b.pin.Unpin()
	if handle != &b.attrs[0] {
		t.Errorf("handle attribute is not the first one")
	}
	var want []byte
	want = append(want, hdrBytes(24+8*16, 3, 0, 8, rxe)...)
	want = append(want, attrBytes(0, 0, 1, 0)...)
	want = append(want, attrBytes(6, 4, 1, ptrData(&cqe))...)
	want = append(want, attrBytes(1, 4, 1, 256)...)
	want = append(want, attrBytes(2, 8, 1, 0x1122334455667788)...)
	want = append(want, attrBytes(3, 0, 1, 21)...)
	want = append(want, attrBytes(4, 4, 1, 2)...)
	want = append(want, attrBytes(7, 0, 0, 20)...)
	want = append(want, attrBytes(0x1001, 16, 1, ptrData(&drv[0]))...)
	expectBytes(t, "create_cq", b.bytes(), want)

	// Without a channel, an async fd or driver data those attributes are
	// left out, as libibverbs leaves out fd attributes of -1.
	b, _ = createCQIoctl(uint32(DriverRXE), CQSpec{CQE: 1}, -1, &cqe, nil)
	defer b.pin.Unpin()
	want = append([]byte(nil), hdrBytes(24+5*16, 3, 0, 5, rxe)...)
	want = append(want, attrBytes(0, 0, 1, 0)...)
	want = append(want, attrBytes(6, 4, 1, ptrData(&cqe))...)
	want = append(want, attrBytes(1, 4, 1, 1)...)
	want = append(want, attrBytes(2, 8, 1, 0)...)
	want = append(want, attrBytes(4, 4, 1, 0)...)
	expectBytes(t, "create_cq minimal", b.bytes(), want)
}

// With a known driver id the verbs try the ioctl first. A memfd answers
// ENOTTY, as a kernel without the ioctl interface does: the verbs then send
// the same write() commands as without a driver id (TestGoldenWriteCommands)
// and never try an ioctl on that context again.
func TestIoctlFallbackToWrite(t *testing.T) {
	c, read := fakeContext(t)
	c.driverID = DriverRXE
	drv := make([]byte, 16)
	cq, err := c.CreateCQ(CQSpec{CQE: 256, UserHandle: 0x1122334455667788}, drv)
	if err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "create_cq fallback", maskResponse(t, read(), 8), unhex(t, `
		12000000 0a00 0600
		0000000000000000 | 8877665544332211 | 00010000 | 00000000 | ffffffff | 00000000`))
	if got := c.noIoctl.Load(); got != ^uint32(0) {
		t.Errorf("after ENOTTY noIoctl = %#x, want every method", got)
	}
	cq.handle = 7
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "destroy_cq fallback", maskResponse(t, read(), 8), unhex(t, `
		14000000 0600 0200
		0000000000000000 | 07000000 | 00000000`))

	pd := &PD{ctx: c, handle: 5}
	qp := &QP{pd: pd, handle: 9}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "destroy_qp fallback", maskResponse(t, read(), 8), unhex(t, `
		1b000000 0600 0100
		0000000000000000 | 09000000 | 00000000`))
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "dealloc_pd fallback", read(), unhex(t, "04000000 0300 0000 | 05000000"))

	// The first fallback of a fresh context, through dereg_mr.
	c2, read2 := fakeContext(t)
	c2.driverID = DriverRXE
	b, err := NewBuffer(4096, BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.register(); err != nil {
		t.Fatal(err)
	}
	mr := &MR{pd: &PD{ctx: c2}, buf: b, handle: 11}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "dereg_mr fallback", read2(), unhex(t, "0d000000 0300 0000 | 0b000000"))
}

// EPROTONOSUPPORT turns off only the method that got it; any other errno is
// the verb's answer and changes nothing.
func TestIoctlFallbackErrnos(t *testing.T) {
	c := &Context{driverID: DriverRXE}
	if c.ioctlFallback(cmdError("dealloc_pd", unix.EINVAL), ioctlDeallocPD) || c.noIoctl.Load() != 0 {
		t.Errorf("EINVAL counted as a missing method (noIoctl %#x)", c.noIoctl.Load())
	}
	if c.ioctlFallback(cmdError("dealloc_pd", unix.EOPNOTSUPP), ioctlDeallocPD) {
		t.Errorf("EOPNOTSUPP counted as a missing method")
	}
	if !c.ioctlFallback(cmdError("dereg_mr", unix.EPROTONOSUPPORT), ioctlDeregMR) {
		t.Fatalf("EPROTONOSUPPORT not counted as a missing method")
	}
	if _, ok := c.ioctlDriver(ioctlDeregMR); ok {
		t.Errorf("dereg_mr ioctl still tried after EPROTONOSUPPORT")
	}
	if id, ok := c.ioctlDriver(ioctlDeallocPD); !ok || id != 14 {
		t.Errorf("dealloc_pd ioctl = %d, %v after another method's EPROTONOSUPPORT; want 14, true", id, ok)
	}
	if _, ok := (&Context{}).ioctlDriver(ioctlDeallocPD); ok {
		t.Errorf("ioctl tried without a driver id")
	}
}

// An ioctl failure that is not a missing method is returned as the verb's
// error, with no write() retry.
func TestIoctlErrorNamesVerb(t *testing.T) {
	c := &Context{fd: &fileDesc{raw: -1}, driverID: DriverRXE} // EBADF
	err := (&PD{ctx: c, handle: 1}).Close()
	var e *Error
	if !errors.Is(err, unix.EBADF) || !errors.As(err, &e) || e.Verb != "dealloc_pd" {
		t.Errorf("dealloc_pd on a closed fd = %v, want a dealloc_pd error wrapping EBADF", err)
	}
	if c.noIoctl.Load() != 0 {
		t.Errorf("EBADF counted as a missing method")
	}
}

// tryIoctl against fake kernel fds: without a driver id it sends nothing;
// on a pipe (no ioctl interface: ENOTTY, as a kernel without
// RDMA_VERBS_IOCTL answers) it sends the built command once with rxe's
// driver id, hands the verb to write() and never tries an ioctl on that
// context again; on a closed fd the errno is the verb's answer.
func TestTryIoctl(t *testing.T) {
	r, _ := nonblockingPipe(t)
	calls, gotID := 0, uint32(0)
	build := func(id uint32) *ioctlBuf {
		calls++
		gotID = id
		return deallocPDIoctl(id, 5)
	}
	c := &Context{fd: &fileDesc{raw: r}}
	if done, err := c.tryIoctl(ioctlDeallocPD, "dealloc_pd", build); done || err != nil || calls != 0 {
		t.Errorf("unknown driver: done %v, err %v, %d ioctls; want the write() fallback and no ioctl", done, err, calls)
	}

	c = &Context{fd: &fileDesc{raw: r}, driverID: DriverRXE}
	if done, err := c.tryIoctl(ioctlDeallocPD, "dealloc_pd", build); done || err != nil || calls != 1 || gotID != 14 {
		t.Errorf("pipe: done %v, err %v, %d ioctls with driver %d; want one ioctl for driver 14 (RDMA_DRIVER_RXE), then the write() fallback", done, err, calls, gotID)
	}
	if got := c.noIoctl.Load(); got != ^uint32(0) {
		t.Errorf("after ENOTTY noIoctl = %#x, want every method", got)
	}
	if done, err := c.tryIoctl(ioctlDestroyCQ, "destroy_cq", build); done || err != nil || calls != 1 {
		t.Errorf("after ENOTTY: done %v, err %v, %d ioctls; want no further ioctl", done, err, calls)
	}

	c = &Context{fd: &fileDesc{raw: -1}, driverID: DriverRXE}
	done, err := c.tryIoctl(ioctlDeallocPD, "dealloc_pd", build)
	if !done || !errors.Is(err, unix.EBADF) || calls != 2 || c.noIoctl.Load() != 0 {
		t.Errorf("closed fd: done %v, err %v, %d ioctls, noIoctl %#x; want EBADF as the answer, no fallback", done, err, calls, c.noIoctl.Load())
	}
}
