package rxe

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs"
)

// createAHResp is struct rxe_create_ah_resp, the driver part of the
// CREATE_AH response. Asking for it is what makes the kernel assign an AH
// number (and what lets a UD WQE carry only that number).
type createAHResp struct {
	ahNum uint32
	_     uint32
}

// AH is an rxe address handle: the kernel object and the AH number rdma_rxe
// assigned to it, which UD work requests carry (SendWR.AH).
type AH struct {
	vah *uverbs.AH
	num uint32
}

// CreateAH creates an address handle on an rxe device and reads the AH
// number the kernel assigned from the 8-byte driver response. attr needs a
// global route (uverbs.GlobalAH). A kernel that assigns no number (which
// would need the whole address vector in every WQE) is refused with
// ErrNotSupported, the handle destroyed.
func CreateAH(pd *uverbs.PD, attr uverbs.AHAttr) (*AH, error) {
	if err := checkDriver("create_ah", pd.Context().Device()); err != nil {
		return nil, err
	}
	var resp createAHResp
	vah, err := pd.CreateAH(attr, unsafe.Slice((*byte)(unsafe.Pointer(&resp)), unsafe.Sizeof(resp)))
	if err != nil {
		return nil, err
	}
	if resp.ahNum == 0 {
		err := fmt.Errorf("rxe: create_ah: the kernel assigned no AH number: %w", ErrNotSupported)
		return nil, errors.Join(err, vah.Close())
	}
	return &AH{vah: vah, num: resp.ahNum}, nil
}

// Num is the AH number the kernel assigned (struct rxe_create_ah_resp's
// ah_num), the only address a UD WQE carries.
func (a *AH) Num() uint32 { return a.num }

// closed reports whether the kernel AH was closed; an AH of the
// simulator (no kernel AH) never is.
func (a *AH) closed() bool { return a.vah != nil && a.vah.Closed() }

// Verbs returns the kernel address handle.
func (a *AH) Verbs() *uverbs.AH { return a.vah }

// Close destroys the address handle. Idempotent; see uverbs.AH.Close.
func (a *AH) Close() error { return a.vah.Close() }
