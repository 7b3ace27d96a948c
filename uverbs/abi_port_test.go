package uverbs

import (
	"testing"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

// struct ib_uverbs_query_port_resp_ex (active_speed_ex, in the headers
// since Linux 6.5, is the last 4 bytes of older headers' reserved[6]) and
// the QUERY_PORT method's ids, from the header like the rest.
func init() {
	pins = append(pins,
		abicheck.Pin{C: "struct ib_uverbs_query_port_resp_ex", Go: of[queryPortRespEx](), Rename: map[string]string{"Legacy": "legacy_resp"}},
		abicheck.Pin{C: "struct ib_uverbs_query_port_resp_ex", Exprs: map[string]uintptr{
			"UVERBS_METHOD_QUERY_PORT":        methodQueryPort,
			"UVERBS_ATTR_QUERY_PORT_PORT_NUM": attrQueryPortPortNum,
			"UVERBS_ATTR_QUERY_PORT_RESP":     attrQueryPortResp,
		}},
	)
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
