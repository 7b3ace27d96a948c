package uverbs

import (
	"reflect"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

// The SRQ commands, pinned to the header like the rest
// (TestABIPinnedToHeaders).
func init() {
	pins = append(pins,
		abicheck.Pin{C: "struct ib_uverbs_create_srq", Go: of[createSRQCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_create_srq_resp", Go: of[createSRQResp]()},
		abicheck.Pin{C: "struct ib_uverbs_modify_srq", Go: of[modifySRQCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_query_srq", Go: of[querySRQCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_query_srq_resp", Go: of[querySRQResp]()},
		abicheck.Pin{C: "struct ib_uverbs_destroy_srq", Go: of[destroySRQCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_destroy_srq_resp", Go: of[destroySRQResp]()},
	)
}

func TestSRQResponseFieldFirst(t *testing.T) {
	ptr := reflect.TypeFor[ptr64]()
	for _, typ := range []reflect.Type{of[createSRQCmd](), of[querySRQCmd](), of[destroySRQCmd]()} {
		if f := typ.Field(0); f.Name != "Response" || f.Type != ptr || f.Offset != 0 {
			t.Errorf("%s starts with %s %s at %d, want Response ptr64 at 0", typ, f.Name, f.Type, f.Offset)
		}
	}
}

// The command, object, method and attribute numbers the SRQ verbs use, from the uapi headers (TestABIPinnedToHeaders).
func init() {
	pins = append(pins, abicheck.Pin{C: "struct ib_uverbs_create_srq", Exprs: map[string]uintptr{
		"IB_USER_VERBS_CMD_CREATE_SRQ":        uintptr(cmdCreateSRQ),
		"IB_USER_VERBS_CMD_MODIFY_SRQ":        uintptr(cmdModifySRQ),
		"IB_USER_VERBS_CMD_QUERY_SRQ":         uintptr(cmdQuerySRQ),
		"IB_USER_VERBS_CMD_DESTROY_SRQ":       uintptr(cmdDestroySRQ),
		"UVERBS_OBJECT_SRQ":                   uintptr(objectSRQ),
		"UVERBS_METHOD_SRQ_CREATE":            uintptr(methodSRQCreate),
		"UVERBS_METHOD_SRQ_DESTROY":           uintptr(methodSRQDestroy),
		"UVERBS_ATTR_CREATE_SRQ_HANDLE":       uintptr(attrCreateSRQHandle),
		"UVERBS_ATTR_CREATE_SRQ_PD_HANDLE":    uintptr(attrCreateSRQPDHandle),
		"UVERBS_ATTR_CREATE_SRQ_USER_HANDLE":  uintptr(attrCreateSRQUserHandle),
		"UVERBS_ATTR_CREATE_SRQ_MAX_WR":       uintptr(attrCreateSRQMaxWR),
		"UVERBS_ATTR_CREATE_SRQ_MAX_SGE":      uintptr(attrCreateSRQMaxSGE),
		"UVERBS_ATTR_CREATE_SRQ_LIMIT":        uintptr(attrCreateSRQLimit),
		"UVERBS_ATTR_CREATE_SRQ_TYPE":         uintptr(attrCreateSRQType),
		"UVERBS_ATTR_CREATE_SRQ_EVENT_FD":     uintptr(attrCreateSRQEventFD),
		"UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR":  uintptr(attrCreateSRQRespMaxWR),
		"UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE": uintptr(attrCreateSRQRespMaxSGE),
		"UVERBS_ATTR_DESTROY_SRQ_HANDLE":      uintptr(attrDestroySRQHandle),
		"UVERBS_ATTR_DESTROY_SRQ_RESP":        uintptr(attrDestroySRQResp),
		"UVERBS_ATTR_CREATE_QP_SRQ_HANDLE":    uintptr(attrCreateQPSRQHandle),
		"IB_UVERBS_SRQT_BASIC":                uintptr(srqTypeBasic),
	}})
}

// IB_SRQ_* and IB_EVENT_* are kernel-internal enums (rdma/ib_verbs.h, not a
// uapi header) whose values the uverbs ABI carries: pinned to the numbers
// ib_verbs.h gives them.
func TestKernelEnumValues(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"IB_SRQ_MAX_WR", int(SRQMaxWR), 1},
		{"IB_SRQ_LIMIT", int(SRQLimit), 2},
		{"IB_EVENT_SRQ_LIMIT_REACHED", int(EventSRQLimitReached), 15},
		{"IB_EVENT_QP_LAST_WQE_REACHED", int(EventQPLastWQEReached), 16},
		{"IB_EVENT_SQ_DRAINED", int(EventSQDrained), 5},
		{"IB_EVENT_CQ_ERR", int(EventCQErr), 0},
		{"IB_EVENT_PORT_ERR", int(EventPortErr), 10},
		{"IB_EVENT_PORT_ACTIVE", int(EventPortActive), 9},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, ib_verbs.h has %d", c.name, c.got, c.want)
		}
	}
}
