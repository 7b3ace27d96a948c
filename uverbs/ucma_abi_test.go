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

// ucmaField is one field: its Go name, its C name and its offset.
type ucmaField struct {
	goName, cName string
	off           uintptr
}

// ucmaLayout pins a Go struct to a struct of <rdma/rdma_user_cm.h>.
type ucmaLayout struct {
	c      string
	typ    reflect.Type
	size   uintptr
	fields []ucmaField
}

// The literals were computed with gcc from Debian 12's
// /usr/include/rdma/rdma_user_cm.h (x86_64; the header pads its structs so
// that they are laid out alike on every 64-bit architecture).
// TestUCMALayoutFromHeader checks each against the installed header.
var ucmaLayouts = []ucmaLayout{
	{"rdma_ucm_cmd_hdr", of[ucmaCmdHdr](), 8, []ucmaField{{"Cmd", "cmd", 0}, {"In", "in", 4}, {"Out", "out", 6}}},
	{"rdma_ucm_create_id", of[ucmaCreateID](), 24, []ucmaField{{"UID", "uid", 0}, {"Response", "response", 8}, {"PS", "ps", 16}, {"QPType", "qp_type", 18}, {"Reserved", "reserved", 19}}},
	{"rdma_ucm_create_id_resp", of[ucmaCreateIDResp](), 4, []ucmaField{{"ID", "id", 0}}},
	{"rdma_ucm_destroy_id", of[ucmaDestroyID](), 16, []ucmaField{{"Response", "response", 0}, {"ID", "id", 8}, {"Reserved", "reserved", 12}}},
	{"rdma_ucm_destroy_id_resp", of[ucmaDestroyIDResp](), 4, []ucmaField{{"EventsReported", "events_reported", 0}}},
	{"rdma_ucm_bind", of[ucmaBind](), 136, []ucmaField{{"ID", "id", 0}, {"AddrSize", "addr_size", 4}, {"Reserved", "reserved", 6}, {"Addr", "addr", 8}}},
	{"rdma_ucm_resolve_addr", of[ucmaResolveAddr](), 272, []ucmaField{
		{"ID", "id", 0}, {"TimeoutMS", "timeout_ms", 4}, {"SrcSize", "src_size", 8}, {"DstSize", "dst_size", 10},
		{"Reserved", "reserved", 12}, {"SrcAddr", "src_addr", 16}, {"DstAddr", "dst_addr", 144}}},
	{"rdma_ucm_resolve_route", of[ucmaResolveRoute](), 8, []ucmaField{{"ID", "id", 0}, {"TimeoutMS", "timeout_ms", 4}}},
	{"rdma_ucm_query", of[ucmaQuery](), 16, []ucmaField{{"Response", "response", 0}, {"ID", "id", 8}, {"Option", "option", 12}}},
	{"rdma_ucm_query_addr_resp", of[ucmaQueryAddrResp](), 280, []ucmaField{
		{"NodeGUID", "node_guid", 0}, {"PortNum", "port_num", 8}, {"Reserved", "reserved", 9}, {"PKey", "pkey", 10},
		{"SrcSize", "src_size", 12}, {"DstSize", "dst_size", 14}, {"SrcAddr", "src_addr", 16}, {"DstAddr", "dst_addr", 144},
		{"IBDevIndex", "ibdev_index", 272}, {"Reserved1", "reserved1", 276}}},
	{"ib_path_rec_data", of[pathRecData](), 72, []ucmaField{{"Flags", "flags", 0}, {"Reserved", "reserved", 4}, {"PathRec", "path_rec", 8}}},
	// The Go struct carries room for two records after the header.
	{"rdma_ucm_query_path_resp", of[ucmaQueryPathResp](), sizeofQueryPathRespHdr + 2*72, []ucmaField{
		{"NumPaths", "num_paths", 0}, {"Reserved", "reserved", 4}, {"PathData", "path_data", 8}}},
	{"rdma_ucm_conn_param", of[ucmaConnParam](), 272, []ucmaField{
		{"QPNum", "qp_num", 0}, {"QKey", "qkey", 4}, {"PrivateData", "private_data", 8}, {"PrivateDataLen", "private_data_len", 264},
		{"SRQ", "srq", 265}, {"ResponderResources", "responder_resources", 266}, {"InitiatorDepth", "initiator_depth", 267},
		{"FlowControl", "flow_control", 268}, {"RetryCount", "retry_count", 269}, {"RNRRetryCount", "rnr_retry_count", 270}, {"Valid", "valid", 271}}},
	{"rdma_ucm_ud_param", of[ucmaUDParam](), 304, []ucmaField{
		{"QPNum", "qp_num", 0}, {"QKey", "qkey", 4}, {"AHAttr", "ah_attr", 8}, {"PrivateData", "private_data", 40},
		{"PrivateDataLen", "private_data_len", 296}, {"Reserved", "reserved", 297}}},
	{"rdma_ucm_ece", of[ucmaECE](), 8, []ucmaField{{"VendorID", "vendor_id", 0}, {"AttrMod", "attr_mod", 4}}},
	{"rdma_ucm_connect", of[ucmaConnect](), 288, []ucmaField{{"ConnParam", "conn_param", 0}, {"ID", "id", 272}, {"Reserved", "reserved", 276}, {"ECE", "ece", 280}}},
	{"rdma_ucm_listen", of[ucmaListen](), 8, []ucmaField{{"ID", "id", 0}, {"Backlog", "backlog", 4}}},
	{"rdma_ucm_accept", of[ucmaAccept](), 296, []ucmaField{{"UID", "uid", 0}, {"ConnParam", "conn_param", 8}, {"ID", "id", 280}, {"Reserved", "reserved", 284}, {"ECE", "ece", 288}}},
	{"rdma_ucm_reject", of[ucmaReject](), 264, []ucmaField{
		{"ID", "id", 0}, {"PrivateDataLen", "private_data_len", 4}, {"Reason", "reason", 5}, {"Reserved", "reserved", 6}, {"PrivateData", "private_data", 8}}},
	{"rdma_ucm_disconnect", of[ucmaDisconnect](), 4, []ucmaField{{"ID", "id", 0}}},
	{"rdma_ucm_init_qp_attr", of[ucmaInitQPAttr](), 16, []ucmaField{{"Response", "response", 0}, {"ID", "id", 8}, {"QPState", "qp_state", 12}}},
	{"ib_uverbs_qp_attr", of[ucmaQPAttr](), 144, []ucmaField{
		{"QPAttrMask", "qp_attr_mask", 0}, {"QPState", "qp_state", 4}, {"CurQPState", "cur_qp_state", 8}, {"PathMTU", "path_mtu", 12},
		{"PathMigState", "path_mig_state", 16}, {"QKey", "qkey", 20}, {"RQPSN", "rq_psn", 24}, {"SQPSN", "sq_psn", 28},
		{"DestQPNum", "dest_qp_num", 32}, {"QPAccessFlags", "qp_access_flags", 36}, {"AHAttr", "ah_attr", 40}, {"AltAHAttr", "alt_ah_attr", 72},
		{"MaxSendWR", "max_send_wr", 104}, {"MaxRecvWR", "max_recv_wr", 108}, {"MaxSendSGE", "max_send_sge", 112}, {"MaxRecvSGE", "max_recv_sge", 116},
		{"MaxInlineData", "max_inline_data", 120}, {"PKeyIndex", "pkey_index", 124}, {"AltPKeyIndex", "alt_pkey_index", 126},
		{"EnSQDAsyncNotify", "en_sqd_async_notify", 128}, {"SQDraining", "sq_draining", 129}, {"MaxRdAtomic", "max_rd_atomic", 130},
		{"MaxDestRdAtomic", "max_dest_rd_atomic", 131}, {"MinRNRTimer", "min_rnr_timer", 132}, {"PortNum", "port_num", 133},
		{"Timeout", "timeout", 134}, {"RetryCnt", "retry_cnt", 135}, {"RNRRetry", "rnr_retry", 136}, {"AltPortNum", "alt_port_num", 137},
		{"AltTimeout", "alt_timeout", 138}, {"Reserved", "reserved", 139}}},
	{"rdma_ucm_notify", of[ucmaNotify](), 8, []ucmaField{{"ID", "id", 0}, {"Event", "event", 4}}},
	{"rdma_ucm_join_mcast", of[ucmaJoinMcast](), 152, []ucmaField{
		{"Response", "response", 0}, {"UID", "uid", 8}, {"ID", "id", 16}, {"AddrSize", "addr_size", 20}, {"JoinFlags", "join_flags", 22}, {"Addr", "addr", 24}}},
	{"rdma_ucm_get_event", of[ucmaGetEvent](), 8, []ucmaField{{"Response", "response", 0}}},
	{"rdma_ucm_event_resp", of[ucmaEventResp](), 336, []ucmaField{
		{"UID", "uid", 0}, {"ID", "id", 8}, {"Event", "event", 12}, {"Status", "status", 16}, {"Param", "param", 20},
		{"Reserved", "reserved", 324}, {"ECE", "ece", 328}}},
	{"rdma_ucm_set_option", of[ucmaSetOption](), 24, []ucmaField{
		{"OptVal", "optval", 0}, {"ID", "id", 8}, {"Level", "level", 12}, {"OptName", "optname", 16}, {"OptLen", "optlen", 20}}},
	{"rdma_ucm_migrate_id", of[ucmaMigrateID](), 16, []ucmaField{{"Response", "response", 0}, {"ID", "id", 8}, {"FD", "fd", 12}}},
	{"rdma_ucm_migrate_resp", of[ucmaMigrateResp](), 4, []ucmaField{{"EventsReported", "events_reported", 0}}},
}

func TestUCMALayout(t *testing.T) {
	for _, l := range ucmaLayouts {
		if got := l.typ.Size(); got != l.size {
			t.Errorf("struct %s: Go %s is %d bytes, C is %d", l.c, l.typ, got, l.size)
		}
		if n := l.typ.NumField(); n != len(l.fields) {
			t.Errorf("struct %s: Go %s has %d fields, the pin lists %d", l.c, l.typ, n, len(l.fields))
		}
		for _, fl := range l.fields {
			f, ok := l.typ.FieldByName(fl.goName)
			if !ok {
				t.Errorf("struct %s: Go %s has no field %s", l.c, l.typ, fl.goName)
				continue
			}
			if f.Offset != fl.off {
				t.Errorf("struct %s: %s at offset %d, C has %s at %d", l.c, fl.goName, f.Offset, fl.cName, fl.off)
			}
		}
	}
	// A frame is the header, then the command, with nothing between.
	var f ucmaFrame[ucmaCreateID]
	if off := reflect.TypeOf(f).Field(1).Offset; off != 8 {
		t.Errorf("command at offset %d of its frame, want 8", off)
	}
}

// TestUCMALayoutFromHeader compiles a program over the installed
// <rdma/rdma_user_cm.h> that prints the size of every pinned struct and the
// offset of every pinned field, and compares them with the Go structs. It
// also checks the command numbers, port spaces, query options and event
// numbers. Skipped without gcc or the header.
func TestUCMALayoutFromHeader(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	if _, err := os.Stat("/usr/include/rdma/rdma_user_cm.h"); err != nil {
		t.Skip("no <rdma/rdma_user_cm.h>")
	}
	type want struct {
		key string
		got uintptr
	}
	var wants []want
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <rdma/rdma_user_cm.h>\nint main(void) {\n")
	emit := func(key, expr string, got uintptr) {
		fmt.Fprintf(&src, "\tprintf(\"%s %%zu\\n\", (size_t)(%s));\n", key, expr)
		wants = append(wants, want{key, got})
	}
	for _, l := range ucmaLayouts {
		size := "sizeof(struct " + l.c + ")"
		if l.c == "rdma_ucm_query_path_resp" {
			size += " + 2 * sizeof(struct ib_path_rec_data)"
		}
		emit(l.c, size, l.typ.Size())
		for _, fl := range l.fields {
			f, _ := l.typ.FieldByName(fl.goName)
			emit(l.c+"."+fl.cName, "offsetof(struct "+l.c+", "+fl.cName+")", f.Offset)
			if l.c == "rdma_ucm_query_path_resp" && fl.cName == "path_data" {
				continue // a flexible array: the Go struct holds two records
			}
			emit(l.c+"."+fl.cName+".size", "sizeof(((struct "+l.c+" *)0)->"+fl.cName+")", f.Type.Size())
		}
	}
	for _, c := range []struct {
		c   string
		got int
	}{
		{"RDMA_USER_CM_ABI_VERSION", ucmaABIVersion}, {"RDMA_MAX_PRIVATE_DATA", ucmaMaxPrivateData},
		{"RDMA_USER_CM_CMD_CREATE_ID", ucmaCmdCreateID}, {"RDMA_USER_CM_CMD_DESTROY_ID", ucmaCmdDestroyID},
		{"RDMA_USER_CM_CMD_BIND_IP", ucmaCmdBindIP}, {"RDMA_USER_CM_CMD_RESOLVE_IP", ucmaCmdResolveIP},
		{"RDMA_USER_CM_CMD_RESOLVE_ROUTE", ucmaCmdResolveRoute}, {"RDMA_USER_CM_CMD_QUERY_ROUTE", ucmaCmdQueryRoute},
		{"RDMA_USER_CM_CMD_CONNECT", ucmaCmdConnect}, {"RDMA_USER_CM_CMD_LISTEN", ucmaCmdListen},
		{"RDMA_USER_CM_CMD_ACCEPT", ucmaCmdAccept}, {"RDMA_USER_CM_CMD_REJECT", ucmaCmdReject},
		{"RDMA_USER_CM_CMD_DISCONNECT", ucmaCmdDisconnect}, {"RDMA_USER_CM_CMD_INIT_QP_ATTR", ucmaCmdInitQPAttr},
		{"RDMA_USER_CM_CMD_GET_EVENT", ucmaCmdGetEvent}, {"RDMA_USER_CM_CMD_GET_OPTION", ucmaCmdGetOption},
		{"RDMA_USER_CM_CMD_SET_OPTION", ucmaCmdSetOption}, {"RDMA_USER_CM_CMD_NOTIFY", ucmaCmdNotify},
		{"RDMA_USER_CM_CMD_JOIN_IP_MCAST", ucmaCmdJoinIPMcast}, {"RDMA_USER_CM_CMD_LEAVE_MCAST", ucmaCmdLeaveMcast},
		{"RDMA_USER_CM_CMD_MIGRATE_ID", ucmaCmdMigrateID}, {"RDMA_USER_CM_CMD_QUERY", ucmaCmdQuery},
		{"RDMA_USER_CM_CMD_BIND", ucmaCmdBind}, {"RDMA_USER_CM_CMD_RESOLVE_ADDR", ucmaCmdResolveAddr},
		{"RDMA_USER_CM_CMD_JOIN_MCAST", ucmaCmdJoinMcast},
		{"RDMA_PS_IPOIB", int(PortSpaceIPoIB)}, {"RDMA_PS_IB", int(PortSpaceIB)}, {"RDMA_PS_TCP", int(PortSpaceTCP)}, {"RDMA_PS_UDP", int(PortSpaceUDP)},
		{"RDMA_USER_CM_QUERY_ADDR", ucmaQueryAddr}, {"RDMA_USER_CM_QUERY_PATH", ucmaQueryPath}, {"RDMA_USER_CM_QUERY_GID", ucmaQueryGID},
		{"RDMA_MC_JOIN_FLAG_FULLMEMBER", MulticastFullMember}, {"RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER", MulticastSendOnlyFullMember},
		{"sizeof(struct __kernel_sockaddr_storage)", sizeofSockaddrStorage},
		{"sizeof(struct sockaddr_in)", sizeofSockaddrIn}, {"sizeof(struct sockaddr_in6)", sizeofSockaddrIn6},
		{"sizeof(struct rdma_ucm_query_path_resp)", sizeofQueryPathRespHdr},
		{"AF_INET6", 10},
	} {
		emit(c.c, c.c, uintptr(c.got))
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ucma.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ucma")
	if out, err := exec.Command(gcc, "-include", "netinet/in.h", "-o", bin, filepath.Join(dir, "ucma.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(wants) {
		t.Fatalf("%d lines from the header program, want %d", len(lines), len(wants))
	}
	for i, line := range lines {
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			t.Fatalf("line %q", line)
		}
		key, val := line[:sp], line[sp+1:]
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil || key != wants[i].key {
			t.Fatalf("line %q: want key %s", line, wants[i].key)
		}
		if uintptr(n) != wants[i].got {
			t.Errorf("%s: header says %d, Go has %d", key, n, wants[i].got)
		}
	}
}
