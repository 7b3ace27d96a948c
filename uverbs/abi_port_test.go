package uverbs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// struct ib_uverbs_query_port_resp_ex: legacy_resp at 0 (40 bytes),
// port_cap_flags2 at 40, then reserved; 48 bytes. active_speed_ex, at 44 in
// rdma-core's headers since v49, is the last 4 bytes of Debian 12's
// reserved[6] (starting at 42).
var portExLayout = layout{"ib_uverbs_query_port_resp_ex", of[queryPortRespEx](), 48,
	map[string]uintptr{"Legacy": 0, "PortCapFlags2": 40, "Reserved": 42, "ActiveSpeedEx": 44}}

func TestQueryPortRespExLayout(t *testing.T) {
	l := portExLayout
	if got := l.typ.Size(); got != l.size {
		t.Errorf("struct %s: Go is %d bytes, C is %d", l.name, got, l.size)
	}
	for name, want := range l.offsets {
		f, ok := l.typ.FieldByName(name)
		if !ok || f.Offset != want {
			t.Errorf("struct %s: %s at %d (found %v), want %d", l.name, name, f.Offset, ok, want)
		}
	}
}

// TestQueryPortRespExFromHeader asks gcc for the size and the offsets of
// struct ib_uverbs_query_port_resp_ex in the installed header.
func TestQueryPortRespExFromHeader(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	if _, err := os.Stat("/usr/include/rdma/ib_user_ioctl_verbs.h"); err != nil {
		t.Skip("no <rdma/ib_user_ioctl_verbs.h>")
	}
	src := `#include <stdio.h>
#include <stddef.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
int main(void) {
	printf("%zu %zu %zu %zu %d %d %d\n", sizeof(struct ib_uverbs_query_port_resp_ex),
		offsetof(struct ib_uverbs_query_port_resp_ex, legacy_resp),
		offsetof(struct ib_uverbs_query_port_resp_ex, port_cap_flags2),
		offsetof(struct ib_uverbs_query_port_resp_ex, reserved),
		UVERBS_METHOD_QUERY_PORT, UVERBS_ATTR_QUERY_PORT_PORT_NUM, UVERBS_ATTR_QUERY_PORT_RESP);
	return 0;
}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "p")
	if out, err := exec.Command(gcc, "-o", bin, filepath.Join(dir, "p.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var r queryPortRespEx
	want := fmt.Sprintf("%d %d %d %d %d %d %d", unsafe.Sizeof(r), unsafe.Offsetof(r.Legacy), unsafe.Offsetof(r.PortCapFlags2),
		unsafe.Offsetof(r.Reserved), methodQueryPort, attrQueryPortPortNum, attrQueryPortResp)
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("header: size, offsets of legacy_resp, port_cap_flags2, reserved, method and attribute ids = %s; Go has %s", got, want)
	}
}

// UVERBS_METHOD_QUERY_PORT (object 0, method 2) as ibv_cmd_query_port
// builds it: PORT_NUM (0) inline as a const, RESP (1) pointing at the
// 48-byte extended response, both mandatory, rxe's driver id in the header.
func TestGoldenQueryPortIoctl(t *testing.T) {
	var r queryPortRespEx
	b := queryPortIoctl(uint32(DriverRXE), 1, &r)
	defer b.pin.Unpin()
	var want []byte
	want = append(want, hdrBytes(24+2*16, 0, 2, 2, 14)...)
	want = append(want, attrBytes(0, 8, 1, 1)...)
	want = append(want, attrBytes(1, 48, 1, ptrData(&r))...)
	expectBytes(t, "query_port", b.bytes(), want)
}

// The ioctl's answer keeps the legacy fields and adds the extended ones.
func TestPortAttrEx(t *testing.T) {
	r := queryPortRespEx{Legacy: queryPortResp{State: 4, InitTypeReply: 3, ActiveSpeed: 8}, PortCapFlags2: 0x12, ActiveSpeedEx: 0x100}
	a := portAttrFromEx(&r)
	if a.State != PortActive || a.InitTypeReply != 3 || a.ActiveSpeed != 8 || a.PortCapFlags2 != 0x12 || a.ActiveSpeedEx != 0x100 {
		t.Errorf("port attr %+v", a)
	}
}

// Every field of the extended QUERY_DEVICE response reaches DeviceAttr: a
// distinct value in each, read back.
func TestDeviceAttrAllFields(t *testing.T) {
	var r exQueryDeviceResp
	b := &r.Base
	b.DeviceCapFlags = 0x01223c76
	b.MaxEERdAtom, b.MaxEEInitRdAtom, b.MaxEE, b.MaxRDD = 11, 12, 13, 14
	b.MaxRawIPv6QP, b.MaxRawEthyQP, b.MaxMcastQPAttach, b.MaxTotalMcastQPAttach = 15, 16, 17, 18
	b.MaxFMR, b.MaxMapPerFMR, b.MaxMcastGrp = 19, 20, 21
	r.DeviceCapFlagsEx = 0x1c001223c76
	r.ODPCaps = odpCaps{GeneralCaps: 1, RCODPCaps: 2, UCODPCaps: 3, UDODPCaps: 4}
	r.XRCODPCaps = 5
	r.RSSCaps = rssCaps{SupportedQPTs: 6, MaxRWQIndirectionTables: 7, MaxRWQIndirectionTableSize: 8}
	r.MaxWQTypeRQ, r.RawPacketCaps = 9, 10
	r.TMCaps = tmCaps{MaxRndvHdrSize: 22, MaxNumTags: 23, Flags: 24, MaxOps: 25, MaxSGE: 26}
	r.CQModerationCaps = cqModerationCaps{MaxCQModerationCount: 27, MaxCQModerationPeriod: 28}
	r.MaxDMSize = 29
	d := deviceAttrFrom(&r)
	want := DeviceAttr{
		DeviceCapFlags: 0x1c001223c76, BaseCapFlags: 0x01223c76, ExCapFlags: 0x1c001223c76,
		MaxEERdAtom: 11, MaxEEInitRdAtom: 12, MaxEE: 13, MaxRDD: 14, MaxRawIPv6QP: 15, MaxRawEthyQP: 16,
		MaxMcastQPAttach: 17, MaxTotalMcastQPAttach: 18, MaxFMR: 19, MaxMapPerFMR: 20, MaxMcastGrp: 21,
		ODP:           ODPCaps{General: 1, RC: 2, UC: 3, UD: 4, XRC: 5},
		RSS:           RSSCaps{SupportedQPTs: 6, MaxRWQIndirectionTables: 7, MaxRWQIndirectionTableSize: 8},
		MaxWQTypeRQ:   9,
		RawPacketCaps: 10,
		TM:            TMCaps{MaxRndvHdrSize: 22, MaxNumTags: 23, Flags: 24, MaxOps: 25, MaxSGE: 26},
		CQModeration:  CQModerationCaps{MaxCount: 27, MaxPeriod: 28},
		MaxDMSize:     29,
	}
	if d != want {
		t.Errorf("device attr\n got %+v\nwant %+v", d, want)
	}
}
