package rxe

import (
	"fmt"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs"
)

// Raw layouts shared with the kernel, from rdma/rdma_user_rxe.h and
// rdma/ib_user_verbs.h. Unions are modelled by their largest member, and the
// other members overlay it through accessors; flexible arrays are left out
// and reached by offset. Sizes and offsets are pinned by abi_test.go.

// mmInfo is struct mminfo: where the kernel lets user space map a queue.
type mmInfo struct {
	offset uint64
	size   uint32
	_      uint32
}

// createCQResp is struct rxe_create_cq_resp, the driver part of the
// CREATE_CQ response.
type createCQResp struct {
	mi mmInfo
}

// createQPResp is struct rxe_create_qp_resp, the driver part of the
// CREATE_QP response.
type createQPResp struct {
	rqMI mmInfo
	sqMI mmInfo
}

// globalRoute is struct rxe_global_route.
type globalRoute struct {
	dgid         [16]byte
	flowLabel    uint32
	sgidIndex    uint8
	hopLimit     uint8
	trafficClass uint8
	_            uint8
}

// addressVector is struct rxe_av. The two sockaddr unions are as large as
// struct sockaddr_in6 (28 bytes).
type addressVector struct {
	portNum     uint8
	networkType uint8
	dmac        [6]byte
	grh         globalRoute
	sgidAddr    [28]byte
	dgidAddr    [28]byte
}

// udWR is the ud member of the wr union in struct rxe_send_wr, the largest
// member, so it stands for the whole union.
type udWR struct {
	remoteQPN  uint32
	remoteQKey uint32
	pkeyIndex  uint16
	_          uint16
	ahNum      uint32
	_          [4]uint32
	av         addressVector
}

// rdmaWR is the rdma member of the wr union in struct rxe_send_wr.
type rdmaWR struct {
	remoteAddr uint64
	rkey       uint32
	_          uint32
}

// sendWR is struct rxe_send_wr.
type sendWR struct {
	wrID      uint64
	_         uint32
	opcode    uint32
	sendFlags uint32
	ex        [4]byte // imm_data (big endian) or invalidate_rkey
	wr        udWR
}

// rdma views the wr union as its rdma member. The union starts at an 8-byte
// aligned offset of an 8-byte aligned struct.
func (w *sendWR) rdma() *rdmaWR { return (*rdmaWR)(unsafe.Pointer(&w.wr)) }

// The other members of the wr union in struct rxe_send_wr (rdma_user_rxe.h),
// viewed over its largest member like rdmaWR.

// atomicWR is the atomic member: CAS and FAA operands.
type atomicWR struct {
	remoteAddr uint64
	compareAdd uint64
	swap       uint64
	rkey       uint32
	_          uint32
}

// mwWR is the mw member: a memory window bind.
type mwWR struct {
	addr   uint64
	length uint64
	mrLKey uint32
	mwRKey uint32
	rkey   uint32
	access uint32
}

// flushWR is the flush member (kernel 6.2 and later).
type flushWR struct {
	remoteAddr uint64
	length     uint32
	rkey       uint32
	typ        uint8
	level      uint8
	_          [6]byte
}

// atomic views the wr union as its atomic member.
func (w *sendWR) atomic() *atomicWR { return (*atomicWR)(unsafe.Pointer(&w.wr)) }

// mw views the wr union as its mw member.
func (w *sendWR) mw() *mwWR { return (*mwWR)(unsafe.Pointer(&w.wr)) }

// flush views the wr union as its flush member.
func (w *sendWR) flush() *flushWR { return (*flushWR)(unsafe.Pointer(&w.wr)) }

// dmaInfo is struct rxe_dma_info without its flexible array; the SGEs (or the
// inline data) follow it.
type dmaInfo struct {
	length    uint32
	resid     uint32
	curSGE    uint32
	numSGE    uint32
	sgeOffset uint32
	_         uint32
}

// sendWQE is struct rxe_send_wqe without the flexible array at its end.
type sendWQE struct {
	wr          sendWR
	status      uint32
	state       uint32
	iova        uint64
	mask        uint32
	firstPSN    uint32
	lastPSN     uint32
	ackLength   uint32
	ssn         uint32
	hasRdAtomic uint32
	dma         dmaInfo
}

// recvWQE is struct rxe_recv_wqe without the flexible array at its end.
type recvWQE struct {
	wrID uint64
	_    uint32
	_    uint32
	dma  dmaInfo
}

// Where the SGE list (or inline data) starts inside a slot.
const (
	sendWQESize = int(unsafe.Sizeof(sendWQE{}))
	recvWQESize = int(unsafe.Sizeof(recvWQE{}))
	sgeSize     = int(unsafe.Sizeof(SGE{}))
)

// uverbsWC is struct ib_uverbs_wc, the element of a user CQ ring.
type uverbsWC struct {
	wrID         uint64
	status       uint32
	opcode       uint32
	vendorErr    uint32
	byteLen      uint32
	ex           [4]byte // imm_data (big endian) or invalidate_rkey
	qpNum        uint32
	srcQP        uint32
	wcFlags      uint32
	pkeyIndex    uint16
	slid         uint16
	sl           uint8
	dlidPathBits uint8
	portNum      uint8
	_            uint8
}

// wcSize is sizeof(struct ib_uverbs_wc); CQ slots are at least this large.
const wcSize = int(unsafe.Sizeof(uverbsWC{}))

// asBytes views a driver response struct as the byte buffer the kernel
// writes it into.
func asBytes[T createCQResp | createQPResp](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// checkDriver refuses a device whose kernel driver is not rdma_rxe: its
// driver response and ring layout are not rxe's, so mapping "rings" from it
// would read garbage. The error names the driver and wraps ErrNotSupported.
func checkDriver(verb string, d uverbs.Device) error {
	if d.DriverID == uverbs.DriverRXE {
		return nil
	}
	driver := d.Driver
	if driver == "" {
		driver = "an unknown driver"
	}
	return fmt.Errorf("rxe: %s: %s is driven by %s, not rxe: %w", verb, d.Name, driver, ErrNotSupported)
}
