package uverbs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The SRQ and resize commands join layouts, so that TestABILayout and
// TestABISizesFromHeaders check them against the headers too.
func init() {
	layouts = append(layouts,
		layout{"ib_uverbs_resize_cq", of[resizeCQCmd](), 16, map[string]uintptr{"Response": 0, "CQHandle": 8, "CQE": 12}},
		layout{"ib_uverbs_resize_cq_resp", of[resizeCQResp](), 8, map[string]uintptr{"CQE": 0}},
		layout{"ib_uverbs_create_srq", of[createSRQCmd](), 32, map[string]uintptr{
			"Response": 0, "UserHandle": 8, "PDHandle": 16, "MaxWR": 20, "MaxSGE": 24, "SRQLimit": 28}},
		layout{"ib_uverbs_create_srq_resp", of[createSRQResp](), 16, map[string]uintptr{
			"SRQHandle": 0, "MaxWR": 4, "MaxSGE": 8, "SRQN": 12}},
		layout{"ib_uverbs_modify_srq", of[modifySRQCmd](), 16, map[string]uintptr{
			"SRQHandle": 0, "AttrMask": 4, "MaxWR": 8, "SRQLimit": 12}},
		layout{"ib_uverbs_query_srq", of[querySRQCmd](), 16, map[string]uintptr{"Response": 0, "SRQHandle": 8}},
		layout{"ib_uverbs_query_srq_resp", of[querySRQResp](), 16, map[string]uintptr{"MaxWR": 0, "MaxSGE": 4, "SRQLimit": 8}},
		layout{"ib_uverbs_destroy_srq", of[destroySRQCmd](), 16, map[string]uintptr{"Response": 0, "SRQHandle": 8}},
		layout{"ib_uverbs_destroy_srq_resp", of[destroySRQResp](), 4, nil},
	)
}

func TestSRQResponseFieldFirst(t *testing.T) {
	ptr := reflect.TypeFor[ptr64]()
	for _, typ := range []reflect.Type{of[resizeCQCmd](), of[createSRQCmd](), of[querySRQCmd](), of[destroySRQCmd]()} {
		if f := typ.Field(0); f.Name != "Response" || f.Type != ptr || f.Offset != 0 {
			t.Errorf("%s starts with %s %s at %d, want Response ptr64 at 0", typ, f.Name, f.Type, f.Offset)
		}
	}
}

// TestSRQConstantsFromHeaders asks gcc for the command, object, method and
// attribute numbers the SRQ and resize verbs use, from the installed uapi
// headers. Skipped without gcc or the headers.
func TestSRQConstantsFromHeaders(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	if _, err := os.Stat("/usr/include/rdma/ib_user_ioctl_cmds.h"); err != nil {
		t.Skip("no <rdma/ib_user_ioctl_cmds.h>")
	}
	want := []struct {
		c   string
		got int
	}{
		{"IB_USER_VERBS_CMD_RESIZE_CQ", cmdResizeCQ},
		{"IB_USER_VERBS_CMD_CREATE_SRQ", cmdCreateSRQ},
		{"IB_USER_VERBS_CMD_MODIFY_SRQ", cmdModifySRQ},
		{"IB_USER_VERBS_CMD_QUERY_SRQ", cmdQuerySRQ},
		{"IB_USER_VERBS_CMD_DESTROY_SRQ", cmdDestroySRQ},
		{"UVERBS_OBJECT_SRQ", objectSRQ},
		{"UVERBS_METHOD_SRQ_CREATE", methodSRQCreate},
		{"UVERBS_METHOD_SRQ_DESTROY", methodSRQDestroy},
		{"UVERBS_ATTR_CREATE_SRQ_HANDLE", attrCreateSRQHandle},
		{"UVERBS_ATTR_CREATE_SRQ_PD_HANDLE", attrCreateSRQPDHandle},
		{"UVERBS_ATTR_CREATE_SRQ_USER_HANDLE", attrCreateSRQUserHandle},
		{"UVERBS_ATTR_CREATE_SRQ_MAX_WR", attrCreateSRQMaxWR},
		{"UVERBS_ATTR_CREATE_SRQ_MAX_SGE", attrCreateSRQMaxSGE},
		{"UVERBS_ATTR_CREATE_SRQ_LIMIT", attrCreateSRQLimit},
		{"UVERBS_ATTR_CREATE_SRQ_TYPE", attrCreateSRQType},
		{"UVERBS_ATTR_CREATE_SRQ_EVENT_FD", attrCreateSRQEventFD},
		{"UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR", attrCreateSRQRespMaxWR},
		{"UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE", attrCreateSRQRespMaxSGE},
		{"UVERBS_ATTR_DESTROY_SRQ_HANDLE", attrDestroySRQHandle},
		{"UVERBS_ATTR_DESTROY_SRQ_RESP", attrDestroySRQResp},
		{"UVERBS_ATTR_CREATE_QP_SRQ_HANDLE", attrCreateQPSRQHandle},
		{"IB_UVERBS_SRQT_BASIC", srqTypeBasic},
		{"IB_SRQ_MAX_WR", int(SRQMaxWR)},
		{"IB_SRQ_LIMIT", int(SRQLimit)},
		{"IB_EVENT_SRQ_LIMIT_REACHED", int(EventSRQLimitReached)},
		{"IB_EVENT_QP_LAST_WQE_REACHED", int(EventQPLastWQEReached)},
		{"IB_EVENT_SQ_DRAINED", int(EventSQDrained)},
		{"IB_EVENT_CQ_ERR", int(EventCQErr)},
		{"IB_EVENT_PORT_ERR", int(EventPortErr)},
		{"IB_EVENT_PORT_ACTIVE", int(EventPortActive)},
	}
	var src strings.Builder
	// IB_SRQ_* and IB_EVENT_* are kernel-internal enums (rdma/ib_verbs.h)
	// whose values the uverbs ABI carries; they are spelled out here with
	// the numbers ib_verbs.h gives them, so the header check covers the
	// uapi ones and this list pins the rest.
	src.WriteString("#include <stdio.h>\n#include <rdma/ib_user_verbs.h>\n#include <rdma/ib_user_ioctl_cmds.h>\n#include <rdma/ib_user_ioctl_verbs.h>\n")
	src.WriteString("enum { IB_SRQ_MAX_WR = 1, IB_SRQ_LIMIT = 2 };\n")
	src.WriteString("enum { IB_EVENT_CQ_ERR = 0, IB_EVENT_SQ_DRAINED = 5, IB_EVENT_PORT_ACTIVE = 9, IB_EVENT_PORT_ERR = 10, IB_EVENT_SRQ_LIMIT_REACHED = 15, IB_EVENT_QP_LAST_WQE_REACHED = 16 };\n")
	src.WriteString("int main(void) {\n")
	for _, w := range want {
		fmt.Fprintf(&src, "\tprintf(\"%%d\\n\", (int)%s);\n", w.c)
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "c")
	if out, err := exec.Command(gcc, "-o", bin, filepath.Join(dir, "c.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(out))
	for i, w := range want {
		if lines[i] != strconv.Itoa(w.got) {
			t.Errorf("%s = %s in the headers, %d here", w.c, lines[i], w.got)
		}
	}
}
