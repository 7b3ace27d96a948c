package main

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// rxeAttr is what rxe0 reported in the VM on 6.1 (rdma_rxe's limits).
func rxeAttr() uverbs.DeviceAttr {
	return uverbs.DeviceAttr{
		NodeGUID: 0xf0fc51fffe755ddc, SysImageGUID: 0xf0fc51fffe755ddc, MaxMRSize: ^uint64(0), PageSizeCap: 0xfffff000,
		VendorID: 0xffffff, MaxQP: 1048560, MaxQPWR: 1048576, BaseCapFlags: 0x01223c76, ExCapFlags: 0x1223c76,
		MaxSGE: 32, MaxSGERd: 32, MaxCQ: 1048576, MaxCQE: 32767, MaxMR: 524287, MaxPD: 1048576,
		MaxQPRdAtom: 128, MaxResRdAtom: 258048, MaxQPInitRdAtom: 128, AtomicCap: 1, MaxMW: 524287,
		MaxMcastGrp: 8192, MaxMcastQPAttach: 56, MaxTotalMcastQPAttach: 458752, MaxAH: 32767,
		MaxSRQ: 917503, MaxSRQWR: 1048576, MaxSRQSGE: 27, MaxPKeys: 64, LocalCAAckDelay: 15, PhysPortCnt: 1,
	}
}

func rxePort() uverbs.PortAttr {
	return uverbs.PortAttr{
		State: uverbs.PortActive, MaxMTU: uverbs.MTU4096, ActiveMTU: uverbs.MTU1024, GIDTableLen: 1024,
		PortCapFlags: 0x00010000, MaxMsgSize: 0x800000, PKeyTableLen: 1, MaxVLNum: 1, ActiveWidth: 1,
		ActiveSpeed: 8, PhysState: 5, LinkLayer: uverbs.LinkLayerEthernet,
	}
}

func gidEntry(index int, addr string) uverbs.GIDEntry {
	return uverbs.GIDEntry{GID: uverbs.GID(netip.MustParseAddr(addr).As16()), Index: index, Port: 1, Type: uverbs.GIDTypeRoCEv2}
}

func render(h *hca, ports []port, verbose bool) string {
	var b strings.Builder
	h.header(&b, verbose)
	for i := range ports {
		h.port(&b, &ports[i], verbose)
	}
	return b.String()
}

// The formatter reproduces, byte for byte, what ibv_devinfo -v (rdma-core
// 44) printed for rxe0 in the VM, from the same values: on 6.1, and on
// 6.12, where max_msg_sz grew to 2 GiB and device_cap_flags_ex gained three
// bits (ATOMIC_WRITE, FLUSH_GLOBAL, FLUSH_PERSISTENT) it calls unknown.
func TestFormatMatchesIbvDevinfo(t *testing.T) {
	for _, tc := range []struct {
		file string
		edit func(*uverbs.DeviceAttr, *uverbs.PortAttr)
		guid uint64
		gid0 string
	}{
		{"testdata/ibv_devinfo-v-rxe0-6.1.txt", func(*uverbs.DeviceAttr, *uverbs.PortAttr) {}, 0xf0fc51fffe755ddc, "fe80::f0fc:51ff:fe75:5ddc"},
		{"testdata/ibv_devinfo-v-rxe0-6.12.txt", func(a *uverbs.DeviceAttr, p *uverbs.PortAttr) {
			a.ExCapFlags = 0x1c001223c76
			p.MaxMsgSize = 0x80000000
		}, 0x349bbffffed290f0, "fe80::349b:bfff:fed2:90f0"},
	} {
		want, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		a, p := rxeAttr(), rxePort()
		a.NodeGUID, a.SysImageGUID = tc.guid, tc.guid
		tc.edit(&a, &p)
		h := hca{name: "rxe0", transport: uverbs.TransportIB, attr: a, compVectors: 2}
		got := render(&h, []port{{num: 1, attr: p, gids: []uverbs.GIDEntry{gidEntry(0, tc.gid0), gidEntry(1, "::ffff:10.99.0.1")}}}, true)
		if got != string(want) {
			gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
			for i := 0; i < len(gl) || i < len(wl); i++ {
				var g, w string
				if i < len(gl) {
					g = gl[i]
				}
				if i < len(wl) {
					w = wl[i]
				}
				if g != w {
					t.Errorf("%s line %d:\n got %q\nwant %q", tc.file, i+1, g, w)
					break
				}
			}
		}
	}
}

// Without -v: the device's identity, then each port's state, MTUs, LIDs
// and link layer (the layout of ibv_devinfo without options).
func TestFormatShort(t *testing.T) {
	h := hca{name: "rxe1", transport: uverbs.TransportIB, attr: rxeAttr(), compVectors: 2}
	h.attr.FWVer = 1<<32 | 2<<16 | 3
	h.attr.VendorPartID, h.attr.HWVer = 7, 0xab
	h.boardID = "B1"
	got := render(&h, []port{{num: 1, attr: rxePort()}}, false)
	want := "hca_id:\trxe1\n" +
		"\ttransport:\t\t\tInfiniBand (0)\n" +
		"\tfw_ver:\t\t\t\t1.2.3\n" +
		"\tnode_guid:\t\t\tf0fc:51ff:fe75:5ddc\n" +
		"\tsys_image_guid:\t\t\tf0fc:51ff:fe75:5ddc\n" +
		"\tvendor_id:\t\t\t0xffffff\n" +
		"\tvendor_part_id:\t\t\t7\n" +
		"\thw_ver:\t\t\t\t0xAB\n" +
		"\tboard_id:\t\t\tB1\n" +
		"\tphys_port_cnt:\t\t\t1\n" +
		"\t\tport:\t1\n" +
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n" +
		"\t\t\tmax_mtu:\t\t4096 (5)\n" +
		"\t\t\tactive_mtu:\t\t1024 (3)\n" +
		"\t\t\tsm_lid:\t\t\t0\n" +
		"\t\t\tport_lid:\t\t0\n" +
		"\t\t\tport_lmc:\t\t0x00\n" +
		"\t\t\tlink_layer:\t\tEthernet\n\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// The optional sections and decodings rxe never shows, against the
// strings ibv_devinfo's source prints for them.
func TestFormatOptionalSections(t *testing.T) {
	a := rxeAttr()
	a.BaseCapFlags = 1<<0 | 1<<29 | 1<<30
	a.ExCapFlags = 1<<34 | 1<<36 | 1<<40
	a.ODP = uverbs.ODPCaps{General: 1 | 4, RC: 1<<0 | 1<<5 | 1<<9}
	a.TimestampMask, a.HCACoreClock = 0xffff, 156250
	a.RawPacketCaps = 1<<1 | 1<<3
	a.RSS = uverbs.RSSCaps{SupportedQPTs: 1<<4 | 1<<8 | 1<<2, MaxRWQIndirectionTables: 3, MaxRWQIndirectionTableSize: 4}
	a.TM = uverbs.TMCaps{MaxRndvHdrSize: 64, MaxNumTags: 10, Flags: 1, MaxOps: 5, MaxSGE: 2}
	a.CQModeration = uverbs.CQModerationCaps{MaxCount: 100, MaxPeriod: 200}
	a.MaxDMSize, a.MaxFMR, a.MaxMapPerFMR, a.MaxSRQ = 4096, 2, 9, 0
	a.MaxQP = 1 << 31 // a C int: prints negative
	h := hca{name: "x", transport: uverbs.TransportIWARP, attr: a}
	p := rxePort()
	p.State, p.ActiveWidth, p.ActiveSpeed, p.ActiveSpeedEx, p.MaxVLNum = 9, 2, 1, 256, 4
	p.PortCapFlags2 = 0x12
	roce1 := uverbs.GIDEntry{GID: uverbs.GID{0xfe, 0x80, 15: 1}, Index: 3, Port: 1, Type: uverbs.GIDTypeRoCEv1}
	nullIID := uverbs.GIDEntry{GID: uverbs.GID{0x20, 0x01}, Index: 4, Port: 1, Type: uverbs.GIDTypeRoCEv2}
	got := render(&h, []port{{num: 1, attr: p, gids: []uverbs.GIDEntry{roce1, nullIID}}}, true)
	for _, want := range []string{
		"\ttransport:\t\t\tiWARP (1)\n",
		"\tmax_qp:\t\t\t\t-2147483648\n",
		"\tdevice_cap_flags:\t\t0x60000001\n\t\t\t\t\tRESIZE_MAX_WR\n\t\t\t\t\tMANAGED_FLOW_STEERING\n\t\t\t\t\tUnknown flags: 0x40000000\n",
		"\tmax_fmr:\t\t\t2\n\tmax_map_per_fmr:\t\t9\n\tmax_srq:\t\t\t0\n\tmax_pkeys:",
		"\tgeneral_odp_caps:\n\t\t\t\t\tODP_SUPPORT\n\t\t\t\t\tUnknown flags: 0x4\n",
		"\trc_odp_caps:\n\t\t\t\t\tSUPPORT_SEND\n\t\t\t\t\tSUPPORT_SRQ\n\t\t\t\t\tUnknown flags: 0x200\n\tuc_odp_caps:\n\t\t\t\t\tNO SUPPORT\n",
		"\tcompletion timestamp_mask:\t\t\t0x000000000000ffff\n\thca_core_clock:\t\t\t156250kHZ\n",
		"\traw packet caps:\n\t\t\t\t\tScatter FCS offload\n\t\t\t\t\tDelay drop\n\tdevice_cap_flags_ex:\t\t0x11400000000\n" +
			"\t\t\t\t\tRAW_SCATTER_FCS\n\t\t\t\t\tPCI_WRITE_END_PADDING\n\t\t\t\t\tUnknown flags: 0x10000000000\n",
		"\t\tmax_rwq_indirection_tables:\t\t\t3\n\t\tmax_rwq_indirection_table_size:\t\t\t4\n",
		"\t\tsupported_qp:\n\t\t\t\t\tSUPPORT_RAW_PACKET\n\t\t\t\t\tSUPPORT_UD\n\t\t\t\t\tUnknown flags: 0x4\n\tmax_wq_type_rq:",
		"\tmax_rndv_hdr_size:\t\t64\n\tmax_num_tags:\t\t\t10\n\tmax_ops:\t\t\t5\n\tmax_sge:\t\t\t2\n\tflags:\n\t\t\t\t\tIBV_TM_CAP_RC\n",
		"\n\tcq moderation caps:\n\t\tmax_cq_count:\t100\n\t\tmax_cq_period:\t200 us\n\n",
		"\tmaximum available device memory:\t4096Bytes\n\n\tnum_comp_vectors:\t\t0\n",
		"\t\t\tstate:\t\t\tinvalid state (9)\n",
		"\t\t\tport_cap_flags2:\t0x0012\n\t\t\tmax_vl_num:\t\t8 (4)\n",
		"\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t200.0 Gbps (256)\n\t\t\tGID[  3]:\t\tfe80:0000:0000:0000:0000:0000:0000:0001, RoCE v1\n\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "phys_state") || strings.Contains(got, "GID[  4]") {
		t.Errorf("phys_state shown for a non-IB transport, or a GID with a zero interface id shown:\n%s", got)
	}
}
