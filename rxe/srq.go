package rxe

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
	"weak"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// createSRQResp is struct rxe_create_srq_resp, the driver part of the
// CREATE_SRQ response.
type createSRQResp struct {
	mi     mmInfo
	srqNum uint32
	_      uint32
}

// modifySRQCmd is struct rxe_modify_srq_cmd: the user address the kernel
// writes the resized ring's struct mminfo to.
type modifySRQCmd struct {
	mmapInfoAddr uint64
}

// resizeCQResp is struct rxe_resize_cq_resp, the driver part of the
// RESIZE_CQ response.
type resizeCQResp struct {
	mi mmInfo
}

// rawBytes views a driver struct as the bytes the kernel reads or writes.
func rawBytes[T createSRQResp | modifySRQCmd | resizeCQResp](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// ErrSRQAttached is what PostRecv on a QP created on an SRQ returns: such a
// QP has no receive queue, its receives are posted to the SRQ. It matches
// unix.EINVAL: it is the caller's mistake, not a missing feature.
var ErrSRQAttached error = &postError{"rxe: the QP takes its receives from an SRQ: post them to the SRQ", unix.EINVAL, nil}

// SRQ is an rxe shared receive queue: the kernel object and its receive
// ring, whose WQEs are the same struct rxe_recv_wqe a QP's receive queue
// holds. PostRecv may be called from several goroutines.
type SRQ struct {
	rq   *recvQueue // rq.mu also guards mem and the ring's replacement by a resize
	mem  *mapping
	vsrq *uverbs.SRQ
	num  uint32 // srq_num from the driver's response
}

// CreateSRQ creates a shared receive queue on an rxe device and maps its
// ring from the driver's response (struct rxe_create_srq_resp). If any step
// fails, the steps before it are undone.
func CreateSRQ(pd *uverbs.PD, attr uverbs.SRQSpec) (*SRQ, error) {
	if err := checkDriver("create_srq", pd.Context().Device()); err != nil {
		return nil, err
	}
	var resp createSRQResp
	vsrq, err := pd.CreateSRQ(attr, rawBytes(&resp))
	if err != nil {
		return nil, err
	}
	mem, r, err := mapRing(pd.Context().Mmap, resp.mi)
	if err == nil && r.ElemSize() < recvWQESize {
		mem.Close()
		err = fmt.Errorf("%w: SRQ slots of %d bytes, want at least %d", ErrBadRing, r.ElemSize(), recvWQESize)
	}
	if err != nil {
		if derr := vsrq.Close(); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, fmt.Errorf("rxe: create_srq: %w", err)
	}
	a := vsrq.Attr()
	s := &SRQ{
		rq:   &recvQueue{producer: producer{ring: r, prod: r.Producer(), maxWR: depth(int(a.MaxWR), r), dev: pd.Context()}, maxSGE: min(int(a.MaxSGE), (r.ElemSize()-recvWQESize)/sgeSize)},
		mem:  mem,
		vsrq: vsrq,
		num:  resp.srqNum,
	}
	w := weak.Make(s)
	if err := vsrq.OnContextClose(func() error {
		if s := w.Value(); s != nil {
			return s.Close()
		}
		return nil
	}); err != nil {
		return nil, err // the Context closed meanwhile; so did s
	}
	return s, nil
}

// PostRecv writes one receive WQE per request into the SRQ's ring: a memory
// operation, no system call; whichever QP on the SRQ receives next consumes
// the oldest. It is all or nothing (ErrQueueFull, ErrTooManySGEs,
// ErrInvalidWR) and allocates nothing.
func (s *SRQ) PostRecv(wrs []RecvWR) error {
	err := s.rq.post(wrs)
	runtime.KeepAlive(s) // its Mapping's cleanup would unmap the ring under the post
	return err
}

// PostRecvFunc is PostRecv for n requests the caller holds in a form of its
// own, written by fill as in QP.PostSendFunc.
func (s *SRQ) PostRecvFunc(n int, fill func(i int, w *RecvWR)) error {
	err := s.rq.postFunc(n, fill)
	runtime.KeepAlive(s) // see PostRecv
	return err
}

// Limits returns the queue depth and SGEs per request PostRecv enforces.
func (s *SRQ) Limits() (maxWR, maxSGE int) {
	s.rq.mu.Lock()
	defer s.rq.mu.Unlock()
	return s.rq.maxWR, s.rq.maxSGE
}

// Num returns the SRQ number rdma_rxe assigned (the core response carries
// one only for XRC SRQs).
func (s *SRQ) Num() uint32 { return s.num }

// Verbs returns the kernel SRQ (for Query, its number, creating QPs on it).
func (s *SRQ) Verbs() *uverbs.SRQ { return s.vsrq }

// Modify changes what mask selects: uverbs.SRQLimit arms the limit event,
// uverbs.SRQMaxWR resizes the queue. For a resize the kernel copies the
// posted requests into a new ring and writes where to map it into memory
// this call provides; Modify maps the new ring, moves posting over to it
// and unmaps the old one, holding the post lock throughout so that no
// request lands in the old ring. If the new ring cannot be mapped after
// the kernel has switched, the SRQ can take no more requests (PostRecv
// returns ErrClosed) and the error says so.
func (s *SRQ) Modify(attr uverbs.SRQAttr, mask uverbs.SRQAttrMask) error {
	// The kernel writes the new ring's mminfo to the address in the
	// command: pinned (on the heap, where nothing moves) until it returns.
	var pin runtime.Pinner
	defer pin.Unpin()
	mi := new(mmInfo)
	cmd := modifySRQCmd{mmapInfoAddr: pinnedAddr(&pin, mi)}
	s.rq.mu.Lock()
	defer s.rq.mu.Unlock()
	if s.rq.ring == nil {
		return fmt.Errorf("rxe: modify_srq: %w", ErrClosed)
	}
	err := s.vsrq.Modify(attr, mask, rawBytes(&cmd))
	if err != nil || mask&uverbs.SRQMaxWR == 0 {
		return err
	}
	mem, r, err := mapRing(s.vsrq.PD().Context().Mmap, *mi)
	if err == nil && r.ElemSize() < recvWQESize {
		mem.Close()
		err = fmt.Errorf("%w: SRQ slots of %d bytes", ErrBadRing, r.ElemSize())
	}
	if err != nil {
		s.rq.ring = nil
		return fmt.Errorf("rxe: modify_srq: the kernel resized the SRQ but its new ring cannot be mapped, the SRQ is unusable: %w", err)
	}
	old := s.mem
	s.rq.ring, s.mem = r, mem
	s.rq.prod = r.Producer()
	s.rq.maxWR = depth(0, r)
	return old.Close()
}

// Close destroys the kernel SRQ, then stops posting and unmaps the ring.
// The kernel refuses (EBUSY) while QPs use the SRQ; a failed destroy leaves
// it usable. Once it has succeeded, Close does nothing.
func (s *SRQ) Close() error {
	if err := s.vsrq.Close(); err != nil {
		return err
	}
	return s.release()
}

// release stops posting and unmaps the ring.
func (s *SRQ) release() error {
	s.rq.mu.Lock()
	defer s.rq.mu.Unlock()
	s.rq.ring = nil
	if s.mem == nil {
		return nil
	}
	return s.mem.Close()
}

// pinnedAddr pins *v until p is unpinned and returns its address, for a
// driver command that carries a user address as an integer (the kernel
// writes through it). Pinning moves v to the heap, whose objects never
// move, and keeps it from being freed; the caller unpins after the command
// has returned. It is the one place rxe turns a pointer into an integer
// (TestUnsafeAddressesSanctioned in uverbs).
func pinnedAddr[T any](p *runtime.Pinner, v *T) uint64 {
	p.Pin(v)
	return uint64(uintptr(unsafe.Pointer(v)))
}
