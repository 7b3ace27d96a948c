package uverbs

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// Resize asks the kernel to change the CQ to hold at least cqe entries
// (IB_USER_VERBS_CMD_RESIZE_CQ) and returns the number it granted.
// driverOut receives the driver's response (for rdma_rxe a struct
// rxe_resize_cq_resp: the new ring's mmap offset and size; the kernel has
// copied the pending completions into it). rdma_rxe refuses (EINVAL) a size
// below the number of completions pending. The provider must not poll
// while the command runs.
func (cq *CQ) Resize(cqe int, driverOut []byte) (int, error) {
	const verb = "resize_cq"
	if cqe <= 0 || cqe > math.MaxInt32 {
		return 0, fmt.Errorf("uverbs: %s: cqe %d: %w", verb, cqe, unix.EINVAL)
	}
	if !cq.gate.enter() {
		return 0, closedError(verb)
	}
	defer cq.gate.leave()
	if err := checkDriverData(verb, nil, len(driverOut), 8); err != nil {
		return 0, err
	}
	var resp respFrame[resizeCQResp]
	var f writeFrame[resizeCQCmd]
	f.req = resizeCQCmd{Response: resp.ptr(), CQHandle: cq.handle, CQE: uint32(cqe)}
	if err := execWrite(cq.ctx, verb, cmdResizeCQ, &f, &resp, nil, len(driverOut)); err != nil {
		return 0, err
	}
	copy(driverOut, resp.drv[:])
	cq.cqe.Store(int64(resp.resp.CQE))
	return int(resp.resp.CQE), nil
}
