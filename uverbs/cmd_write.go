package uverbs

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxDriverData bounds the driver-specific request and response data
// (udata) one write() command carries. rdma_rxe needs 32 bytes at most
// (struct rxe_create_qp_resp); the bound keeps command frames on the stack.
const maxDriverData = 64

// writeFrame is the contiguous image of a legacy write() command:
// struct ib_uverbs_cmd_hdr, the core request, then the driver request.
type writeFrame[Req any] struct {
	hdr cmdHdr
	req Req
	drv [maxDriverData]byte
}

// exWriteFrame is the image of an extended write() command:
// struct ib_uverbs_cmd_hdr, struct ib_uverbs_ex_cmd_hdr, the core request,
// then the driver request.
type exWriteFrame[Req any] struct {
	hdr cmdHdr
	ex  exCmdHdr
	req Req
	drv [maxDriverData]byte
}

// respFrame receives the core response and, directly after it, the driver
// response; the kernel writes both through one response pointer.
type respFrame[Resp any] struct {
	resp Resp
	drv  [maxDriverData]byte
}

// ptr is the value for the request's Response field. Callers store it with
// a plain field assignment, which keeps both frames on the stack.
func (r *respFrame[Resp]) ptr() ptr64 { return ptr64{unsafe.Pointer(r)} }

// noResp is the response frame of commands without a response.
var noResp *respFrame[struct{}]

// checkDriverData refuses driver data that does not fit a frame, or that
// the header's word counts (of unit bytes) cannot express.
func checkDriverData(verb string, in []byte, out, unit int) error {
	if len(in) > maxDriverData || out > maxDriverData {
		return fmt.Errorf("uverbs: %s: driver data of %d/%d bytes exceeds %d: %w", verb, len(in), out, maxDriverData, ErrNotSupported)
	}
	if len(in)%unit != 0 || out%unit != 0 {
		return fmt.Errorf("uverbs: %s: driver data of %d/%d bytes is not a multiple of %d: %w", verb, len(in), out, unit, unix.EINVAL)
	}
	return nil
}

// buildWrite completes f, whose request the caller filled in, with the
// header and the driver data, and returns how many bytes to write. in_words
// and out_words count 4-byte words of the whole request and of the whole
// response (core and driver parts).
func buildWrite[Req, Resp any](f *writeFrame[Req], cmd uint32, resp *respFrame[Resp], driverIn []byte, driverOut int) uintptr {
	n := unsafe.Offsetof(f.drv) + uintptr(copy(f.drv[:], driverIn))
	f.hdr = cmdHdr{
		Command:  cmd,
		InWords:  uint16(n / 4),
		OutWords: uint16((unsafe.Sizeof(resp.resp) + uintptr(driverOut)) / 4),
	}
	return n
}

// execWrite runs one legacy write() command on fd: the request in f.req
// plus driverIn; the kernel answers into resp, driverOut bytes of driver
// data included. f.req's Response field, if the command has one, must hold
// resp.ptr(). Callers fill f.req themselves rather than passing a request
// to copy: a copy of a pointer-holding type parameter inside generic code
// would move both frames to the heap.
func execWrite[Req, Resp any](c *Context, verb string, cmd uint32, f *writeFrame[Req], resp *respFrame[Resp], driverIn []byte, driverOut int) error {
	if len(driverIn)|driverOut != 0 {
		if err := checkDriverData(verb, driverIn, driverOut, 4); err != nil {
			return err
		}
	}
	n := buildWrite(f, cmd, resp, driverIn, driverOut)
	return writeCmd(c, verb, unsafe.Pointer(f), n)
}

// hotFrame is the image of a legacy write() command that carries no
// driver data: the send doorbell's and req_notify_cq's, which run once a
// message. Unlike writeFrame it has no room for driver data, which would
// be zeroed on every call.
type hotFrame[Req any] struct {
	hdr cmdHdr
	req Req
}

// hotWrite writes the send doorbell or req_notify_cq, commands that never
// sleep in the kernel, through RawSyscall (see fullIO). The caller holds
// the gate of the object the command names; that gate keeps c's fd open,
// since Context.Close shuts the gate of every object before it closes the
// fd, so c's own gate is not taken. The header's lengths are constants of
// each command: in is the frame's size, out the response's.
func hotWrite(c *Context, f unsafe.Pointer, in uintptr, out uint16, cmd uint32) unix.Errno {
	*(*cmdHdr)(f) = cmdHdr{Command: cmd, InWords: uint16(in / 4), OutWords: out}
	errno := fullIO(c.fd.int(), f, in, true)
	runtime.KeepAlive(c) // see writeCmd
	return errno
}

// buildWriteEx completes an extended command: the response pointer lives
// in the extended header, and the lengths count 8-byte words of the core
// and the driver parts separately.
func buildWriteEx[Req, Resp any](f *exWriteFrame[Req], cmd uint32, resp *respFrame[Resp], driverIn []byte, driverOut int) uintptr {
	f.ex.Response = resp.ptr()
	f.ex.ProviderInWords = uint16(len(driverIn) / 8)
	f.ex.ProviderOutWords = uint16(driverOut / 8)
	n := unsafe.Offsetof(f.drv) + uintptr(copy(f.drv[:], driverIn))
	f.hdr = cmdHdr{
		Command:  cmdFlagExtended | cmd,
		InWords:  uint16(unsafe.Sizeof(f.req) / 8),
		OutWords: uint16(unsafe.Sizeof(resp.resp) / 8),
	}
	return n
}

// execWriteEx runs one extended write() command on fd, the request in
// f.req; the response goes to resp.
func execWriteEx[Req, Resp any](c *Context, verb string, cmd uint32, f *exWriteFrame[Req], resp *respFrame[Resp], driverIn []byte, driverOut int) error {
	if len(driverIn)|driverOut != 0 {
		if err := checkDriverData(verb, driverIn, driverOut, 8); err != nil {
			return err
		}
	}
	n := buildWriteEx(f, cmd, resp, driverIn, driverOut)
	return writeCmd(c, verb, unsafe.Pointer(f), n)
}
