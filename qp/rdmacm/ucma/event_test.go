package ucma

import (
	"testing"
	"unsafe"
)

func TestEventDecoding(t *testing.T) {
	var r ucmaEventResp
	r.UID, r.ID, r.Event, r.Status = 7, 3, uint32(EventRejected), 8
	cp := ucmaConnParam{QPNum: 0x11, PrivateDataLen: 3, ResponderResources: 1, InitiatorDepth: 2, RetryCount: 6, RNRRetryCount: 7}
	copy(cp.PrivateData[:], "abc")
	*(*ucmaConnParam)(ptrOf(&r.Param)) = cp
	ev := eventFrom(&r)
	p := ev.ConnParam()
	if ev.Type != EventRejected || ev.Status != 8 || ev.UID != 7 || ev.ID != 3 || string(p.PrivateData) != "abc" || p.QPNum != 0x11 || p.InitiatorDepth != 2 || p.RNRRetryCount != 7 {
		t.Errorf("decoded %+v %+v", ev, p)
	}
	if ev.Type.String() != "REJECTED" || EventTimewaitExit.String() != "TIMEWAIT_EXIT" {
		t.Errorf("names %v %v", ev.Type, EventTimewaitExit)
	}
	u := ucmaUDParam{QPNum: 0x22, QKey: 0x01234567, PrivateDataLen: 1}
	// is_global and grh.hop_limit, at their offsets in struct
	// ib_uverbs_ah_attr (uverbs pins the layout to the header).
	ah := (*[32]uint8)(unsafe.Pointer(&u.AHAttr))
	ah[29], ah[21] = 1, 64
	*(*ucmaUDParam)(ptrOf(&r.Param)) = u
	ev = eventFrom(&r)
	up := ev.UDParam()
	if up.QPNum != 0x22 || up.QKey != 0x01234567 || !up.AH.IsGlobal || up.AH.GRH.HopLimit != 64 || len(up.PrivateData) != 1 {
		t.Errorf("UD decoded %+v", up)
	}
	ev.Status = -110
	if ev.Errno() != 110 {
		t.Errorf("Errno %v", ev.Errno())
	}
}

func ptrOf(p *[304]uint8) unsafe.Pointer { return unsafe.Pointer(p) }
