package uverbs

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// Access is a set of memory region / QP access flags (enum
// ib_uverbs_access_flags).
type Access uint32

// Access flags.
const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
	AccessMWBind       Access = 1 << 4
	AccessZeroBased    Access = 1 << 5
	AccessOnDemand     Access = 1 << 6
	AccessHugeTLB      Access = 1 << 7
	// AccessFlushGlobal and AccessFlushPersistent let peers FLUSH the
	// region (kernel 6.2+).
	AccessFlushGlobal     Access = 1 << 8
	AccessFlushPersistent Access = 1 << 9

	// AccessRelaxedOrdering is an optional flag: devices that do not
	// know it ignore it.
	AccessRelaxedOrdering Access = 1 << 20
)

var accessNames = []struct {
	a    Access
	name string
}{
	{AccessLocalWrite, "LocalWrite"}, {AccessRemoteWrite, "RemoteWrite"},
	{AccessRemoteRead, "RemoteRead"}, {AccessRemoteAtomic, "RemoteAtomic"},
	{AccessMWBind, "MWBind"}, {AccessZeroBased, "ZeroBased"},
	{AccessOnDemand, "OnDemand"}, {AccessHugeTLB, "HugeTLB"},
	{AccessFlushGlobal, "FlushGlobal"}, {AccessFlushPersistent, "FlushPersistent"},
	{AccessRelaxedOrdering, "RelaxedOrdering"},
}

// String lists the flags set, joined by "|"; unknown bits are shown in hex.
func (a Access) String() string {
	if a == 0 {
		return "0"
	}
	var parts []string
	for _, n := range accessNames {
		if a&n.a != 0 {
			parts = append(parts, n.name)
			a &^= n.a
		}
	}
	if a != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(a)))
	}
	return strings.Join(parts, "|")
}

// checkMRAccess applies the kernel's rule (ib_check_mr_access) before the
// call, so that the error says why.
func checkMRAccess(a Access) error {
	if a&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && a&AccessLocalWrite == 0 {
		return fmt.Errorf("uverbs: reg_mr: access %v: remote write and remote atomic need LocalWrite: %w", a, unix.EINVAL)
	}
	return nil
}

// MR is a registered memory region.
type MR struct {
	pd     *PD
	buf    *Buffer
	handle uint32
	lkey   uint32
	rkey   uint32
	addr   uint64
	length int
	kid    *child
	gate   gate
	watch  leakcheck.Watch
}

// RegisterMR registers all of b with access (IB_USER_VERBS_CMD_REG_MR). The
// I/O virtual address is the buffer's address, as with ibv_reg_mr.
func (pd *PD) RegisterMR(b *Buffer, access Access) (*MR, error) {
	return pd.RegisterMRRange(b, 0, b.Len(), access)
}

// RegisterMRRange registers length bytes of b starting at off.
func (pd *PD) RegisterMRRange(b *Buffer, off, length int, access Access) (*MR, error) {
	return pd.registerMR(b, off, length, b.Addr()+uint64(off), access)
}

// registerMR registers length bytes of b at off under I/O virtual address
// iova.
func (pd *PD) registerMR(b *Buffer, off, length int, iova uint64, access Access) (*MR, error) {
	if off < 0 || length <= 0 || off > b.Len() || length > b.Len()-off {
		return nil, fmt.Errorf("uverbs: reg_mr: range [%d, +%d) outside buffer of %d bytes: %w", off, length, b.Len(), unix.EINVAL)
	}
	if err := checkMRAccess(access); err != nil {
		return nil, err
	}
	if !pd.gate.enter() {
		return nil, closedError("reg_mr")
	}
	defer pd.gate.leave()
	if err := b.register(); err != nil {
		return nil, err
	}
	addr := b.Addr() + uint64(off)
	var resp respFrame[regMRResp]
	var f writeFrame[regMRCmd]
	f.req = regMRCmd{
		Response:    resp.ptr(),
		Start:       addr,
		Length:      uint64(length),
		HCAVA:       iova,
		PDHandle:    pd.handle,
		AccessFlags: uint32(access),
	}
	if err := execWrite(pd.ctx, "reg_mr", cmdRegMR, &f, &resp, nil, 0); err != nil {
		b.unregister()
		return nil, err
	}
	r := &resp.resp
	mr := &MR{pd: pd, buf: b, handle: r.MRHandle, lkey: r.LKey, rkey: r.RKey, addr: iova, length: length}
	mr.kid = addChild(&pd.ctx.kids, levelCQMR, mr, (*MR).Close)
	mr.watch = watchKernelObject(mr, "MR", mr.handle)
	return mr, nil
}

// SGE is one scatter/gather element of a work request: Length bytes at
// virtual address Addr inside a memory region whose local key is LKey. Its
// layout is struct ib_uverbs_sge (and rxe's struct rxe_sge). Make one with
// MR.SGE rather than by address arithmetic.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SGE returns the scatter/gather element for length bytes at offset off of
// the region. A range outside the region, or longer than an SGE can say
// (4 GiB - 1), is an error wrapping unix.EINVAL.
func (mr *MR) SGE(off, length int) (SGE, error) {
	if off < 0 || length < 0 || length > math.MaxUint32 || off > mr.length || length > mr.length-off {
		return SGE{}, fmt.Errorf("uverbs: SGE [%d, +%d) outside the %d-byte memory region: %w", off, length, mr.length, unix.EINVAL)
	}
	return SGE{Addr: mr.addr + uint64(off), Length: uint32(length), LKey: mr.lkey}, nil
}

// LKey returns the local key, for SGEs.
func (mr *MR) LKey() uint32 { return mr.lkey }

// RKey returns the remote key, for peers' RDMA reads and writes.
func (mr *MR) RKey() uint32 { return mr.rkey }

// Addr returns the region's I/O virtual address: where it starts for SGEs
// and for peers' RDMA (the buffer's address unless registered with
// RegisterMRIOVA).
func (mr *MR) Addr() uint64 { return mr.addr }

// Len returns the region's length in bytes.
func (mr *MR) Len() int { return mr.length }

// Handle returns the kernel handle of the MR.
func (mr *MR) Handle() uint32 { return mr.handle }

// Buffer returns the buffer the region covers.
func (mr *MR) Buffer() *Buffer { return mr.buf }

// Close deregisters the region (UVERBS_METHOD_MR_DESTROY, or
// IB_USER_VERBS_CMD_DEREG_MR on a kernel without it). Idempotent; after the
// Context was closed it only releases the buffer.
func (mr *MR) Close() error {
	return mr.gate.shut(func() error {
		if !mr.pd.ctx.released() {
			if err := destroyed(mr.pd.ctx, mr.dereg()); err != nil {
				return err
			}
		}
		mr.watch.Closed()
		mr.buf.unregister()
		mr.pd.ctx.kids.remove(mr.kid)
		return nil
	})
}

// dereg sends the ioctl, as libibverbs 44 does, and the write() command
// only when the kernel lacks the method.
func (mr *MR) dereg() error {
	const verb = "dereg_mr"
	c := mr.pd.ctx
	if done, err := c.tryIoctl(ioctlDeregMR, verb, func(driverID uint32) *ioctlBuf {
		return deregMRIoctl(driverID, mr.handle)
	}); done {
		return err
	}
	var f writeFrame[deregMRCmd]
	f.req = deregMRCmd{MRHandle: mr.handle}
	return execWrite(c, verb, cmdDeregMR, &f, noResp, nil, 0)
}

// deregMRIoctl builds UVERBS_METHOD_MR_DESTROY as ibv_cmd_dereg_mr does:
// only the handle, with destroy access.
func deregMRIoctl(driverID, handle uint32) *ioctlBuf {
	b := newIoctl(objectMR, methodMRDestroy, driverID)
	b.objIn(attrDestroyMRHandle, handle)
	return b
}

// RegisterMRIOVA registers length bytes of b starting at off under the I/O
// virtual address iova instead of their address, as ibv_reg_mr_iova does:
// the region's SGEs (MR.SGE) and the remote addresses peers use (MR.Addr
// plus an offset) count from iova, whatever the memory's address. With
// AccessZeroBased, iova is 0.
func (pd *PD) RegisterMRIOVA(b *Buffer, off, length int, iova uint64, access Access) (*MR, error) {
	return pd.registerMR(b, off, length, iova, access)
}

// Rereg moves the region to another protection domain (pd non-nil) and/or
// gives it new access flags (access non-nil), keeping its memory
// (IB_USER_VERBS_CMD_REREG_MR with IB_MR_REREG_PD / IB_MR_REREG_ACCESS, as
// ibv_rereg_mr). The lkey and rkey may change: take them again afterwards.
// It must not run while the region is used to build SGEs. rdma_rxe has it
// from Linux 6.5 on (HaveReregMR tells); before, the error holds a
// *FeatureError and matches ErrNotSupported.
func (mr *MR) Rereg(pd *PD, access *Access) error {
	const verb = "rereg_mr"
	if !mr.gate.enter() {
		return closedError(verb)
	}
	defer mr.gate.leave()
	if pd != nil {
		if !pd.gate.enter() {
			return closedError(verb)
		}
		defer pd.gate.leave()
	}
	var flags uint32
	f := writeFrame[reregMRCmd]{}
	var resp respFrame[reregMRResp]
	f.req = reregMRCmd{Response: resp.ptr(), MRHandle: mr.handle}
	if pd != nil {
		if pd.ctx != mr.pd.ctx {
			return fmt.Errorf("uverbs: rereg_mr: the PD belongs to another context: %w", unix.EINVAL)
		}
		flags |= reregPD
		f.req.PDHandle = pd.handle
	}
	if access != nil {
		if err := checkMRAccess(*access); err != nil {
			return err
		}
		flags |= reregAccess
		f.req.AccessFlags = uint32(*access)
	}
	if flags == 0 {
		return nil
	}
	f.req.Flags = flags
	err := execWrite(mr.pd.ctx, "rereg_mr", cmdReregMR, &f, &resp, nil, 0)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("%w: %w", err, &FeatureError{Feature: "rereg_mr", Device: mr.pd.ctx.Device().Name, Since: reregSince})
	}
	if err != nil {
		return err
	}
	if pd != nil {
		mr.pd = pd
	}
	mr.lkey, mr.rkey = resp.resp.LKey, resp.resp.RKey
	return nil
}
