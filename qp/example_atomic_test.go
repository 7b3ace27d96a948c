package qp_test

import (
	"encoding/binary"
	"log"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// A fetch-and-add on an 8-byte counter in the peer's memory: the peer
// registered it with AccessRemoteAtomic and sent its address and rkey; the
// old value lands in the 8-byte local SGE.
func ExampleQP_PostSend_fetchAndAdd() {
	var (
		q          *qp.QP     // an RC QP in StateRTS, connected to the peer
		mr         *uverbs.MR // local memory registered with AccessLocalWrite
		remoteAddr uint64     // the peer's counter (8-byte aligned)
		rkey       uint32     // the peer's MR's rkey
	)
	old, err := mr.SGE(0, 8) // exactly one 8-byte SGE, or ErrAtomicSize
	if err != nil {
		log.Fatal(err)
	}
	err = q.PostSend([]qp.SendWR{{
		ID:         1,
		Opcode:     qp.AtomicFetchAndAdd,
		Flags:      qp.Signaled,
		SGEs:       []uverbs.SGE{old},
		RemoteAddr: remoteAddr, // not 8-byte aligned: ErrAtomicAlign
		RKey:       rkey,
		CompareAdd: 1, // the addend
	}})
	if err != nil {
		log.Fatal(err)
	}
	// Once the completion (cq.OpFetchAdd) is polled, the counter's value
	// before the add is in the first 8 bytes of mr's buffer.
	_ = binary.NativeEndian.Uint64(mr.Buffer().Bytes()[:8])
}
