package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pureverbs/pureverbs/tools/internal/inet6"
	"github.com/pureverbs/pureverbs/uverbs"
)

// hca is what ibv_devinfo shows of one device, read through pureverbs.
type hca struct {
	name        string
	transport   uverbs.Transport
	boardID     string
	attr        uverbs.DeviceAttr
	compVectors int
	ports       []port // the ports asked for, in order
}

// port is one port's attributes and its populated GID table entries.
type port struct {
	num  uint8
	attr uverbs.PortAttr
	gids []uverbs.GIDEntry // in index order
}

// guid is ibv_devinfo's GUID notation: four groups of four hex digits.
func guid(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48&0xffff, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// rxeFWVer is the firmware version string librxe builds from the raw
// number: major, minor and sub-minor from bits 47..32, 31..16 and 15..0.
func rxeFWVer(v uint64) string {
	return fmt.Sprintf("%d.%d.%d", v>>32&0xffff, v>>16&0xffff, v&0xffff)
}

// i32 is how ibv_devinfo's %d shows a 32-bit count held in a C int.
func i32(v int) int32 { return int32(uint32(v)) }

// header writes the device part: everything up to the first port.
func (h *hca) header(b *strings.Builder, verbose bool) {
	a := &h.attr
	fmt.Fprintf(b, "hca_id:\t%s\n", h.name)
	fmt.Fprintf(b, "\ttransport:\t\t\t%s (%d)\n", h.transport, int(h.transport))
	fmt.Fprintf(b, "\tfw_ver:\t\t\t\t%s\n", rxeFWVer(a.FWVer))
	fmt.Fprintf(b, "\tnode_guid:\t\t\t%s\n", guid(a.NodeGUID))
	fmt.Fprintf(b, "\tsys_image_guid:\t\t\t%s\n", guid(a.SysImageGUID))
	fmt.Fprintf(b, "\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	fmt.Fprintf(b, "\tvendor_part_id:\t\t\t%d\n", int32(a.VendorPartID))
	fmt.Fprintf(b, "\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	if h.boardID != "" {
		fmt.Fprintf(b, "\tboard_id:\t\t\t%s\n", h.boardID)
	}
	fmt.Fprintf(b, "\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if !verbose {
		return
	}
	fmt.Fprintf(b, "\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	fmt.Fprintf(b, "\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
	fmt.Fprintf(b, "\tmax_qp:\t\t\t\t%d\n", i32(a.MaxQP))
	fmt.Fprintf(b, "\tmax_qp_wr:\t\t\t%d\n", i32(a.MaxQPWR))
	fmt.Fprintf(b, "\tdevice_cap_flags:\t\t0x%08x\n", a.BaseCapFlags)
	flagLines(b, uint64(a.BaseCapFlags), deviceCapNames, hexUpper)
	for _, f := range []struct {
		tabs string
		name string
		v    int
	}{
		{"\t\t\t", "max_sge", a.MaxSGE}, {"\t\t\t", "max_sge_rd", a.MaxSGERd}, {"\t\t\t\t", "max_cq", a.MaxCQ},
		{"\t\t\t", "max_cqe", a.MaxCQE}, {"\t\t\t\t", "max_mr", a.MaxMR}, {"\t\t\t\t", "max_pd", a.MaxPD},
		{"\t\t\t", "max_qp_rd_atom", a.MaxQPRdAtom}, {"\t\t\t", "max_ee_rd_atom", a.MaxEERdAtom},
		{"\t\t", "max_res_rd_atom", a.MaxResRdAtom}, {"\t\t", "max_qp_init_rd_atom", a.MaxQPInitRdAtom},
		{"\t\t", "max_ee_init_rd_atom", a.MaxEEInitRdAtom},
	} {
		fmt.Fprintf(b, "\t%s:%s%d\n", f.name, f.tabs, i32(f.v))
	}
	fmt.Fprintf(b, "\tatomic_cap:\t\t\t%s (%d)\n", atomicCapName(a.AtomicCap), int32(a.AtomicCap))
	for _, f := range []struct {
		tabs string
		name string
		v    int
	}{
		{"\t\t\t\t", "max_ee", a.MaxEE}, {"\t\t\t", "max_rdd", a.MaxRDD}, {"\t\t\t\t", "max_mw", a.MaxMW},
		{"\t\t", "max_raw_ipv6_qp", a.MaxRawIPv6QP}, {"\t\t", "max_raw_ethy_qp", a.MaxRawEthyQP},
		{"\t\t\t", "max_mcast_grp", a.MaxMcastGrp}, {"\t\t", "max_mcast_qp_attach", a.MaxMcastQPAttach},
		{"\t", "max_total_mcast_qp_attach", a.MaxTotalMcastQPAttach}, {"\t\t\t\t", "max_ah", a.MaxAH},
		{"\t\t\t", "max_fmr", a.MaxFMR},
	} {
		fmt.Fprintf(b, "\t%s:%s%d\n", f.name, f.tabs, i32(f.v))
	}
	if a.MaxFMR != 0 {
		fmt.Fprintf(b, "\tmax_map_per_fmr:\t\t%d\n", i32(a.MaxMapPerFMR))
	}
	fmt.Fprintf(b, "\tmax_srq:\t\t\t%d\n", i32(a.MaxSRQ))
	if a.MaxSRQ != 0 {
		fmt.Fprintf(b, "\tmax_srq_wr:\t\t\t%d\n", i32(a.MaxSRQWR))
		fmt.Fprintf(b, "\tmax_srq_sge:\t\t\t%d\n", i32(a.MaxSRQSGE))
	}
	fmt.Fprintf(b, "\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
	fmt.Fprintf(b, "\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)

	b.WriteString("\tgeneral_odp_caps:\n")
	flagLines(b, a.ODP.General, odpGeneralNames, hexUpper)
	for _, t := range []struct {
		name string
		caps uint32
	}{{"rc", a.ODP.RC}, {"uc", a.ODP.UC}, {"ud", a.ODP.UD}, {"xrc", a.ODP.XRC}} {
		fmt.Fprintf(b, "\t%s_odp_caps:\n", t.name)
		if t.caps == 0 {
			b.WriteString("\t\t\t\t\tNO SUPPORT\n")
			continue
		}
		flagLines(b, uint64(t.caps), odpTransportNames, hexUpper)
	}
	if a.TimestampMask != 0 {
		fmt.Fprintf(b, "\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.TimestampMask)
	} else {
		b.WriteString("\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		fmt.Fprintf(b, "\thca_core_clock:\t\t\t%dkHZ\n", a.HCACoreClock)
	} else {
		b.WriteString("\tcore clock not supported\n")
	}
	if a.RawPacketCaps != 0 {
		b.WriteString("\traw packet caps:\n")
		flagLines(b, uint64(a.RawPacketCaps), rawPacketCapNames, nil)
	}
	fmt.Fprintf(b, "\tdevice_cap_flags_ex:\t\t0x%X\n", a.ExCapFlags)
	flagLines(b, a.ExCapFlags&^0xffffffff, deviceCapExNames, hexUpper)

	// TSO and packet pacing are capabilities of mlx5's provider, never
	// reported by the kernel's common commands: zero for rxe.
	b.WriteString("\ttso_caps:\n\t\tmax_tso:\t\t\t0\n")
	b.WriteString("\trss_caps:\n")
	fmt.Fprintf(b, "\t\tmax_rwq_indirection_tables:\t\t\t%d\n", uint32(a.RSS.MaxRWQIndirectionTables))
	fmt.Fprintf(b, "\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", uint32(a.RSS.MaxRWQIndirectionTableSize))
	b.WriteString("\t\trx_hash_function:\t\t\t\t0x0\n\t\trx_hash_fields_mask:\t\t\t\t0x0\n")
	if a.RSS.SupportedQPTs != 0 {
		b.WriteString("\t\tsupported_qp:\n")
		flagLines(b, uint64(a.RSS.SupportedQPTs), qpTypeBits, hexUpper)
	}
	fmt.Fprintf(b, "\tmax_wq_type_rq:\t\t\t%d\n", uint32(a.MaxWQTypeRQ))
	b.WriteString("\tpacket_pacing_caps:\n\t\tqp_rate_limit_min:\t0kbps\n\t\tqp_rate_limit_max:\t0kbps\n")
	if tm := a.TM; tm.MaxNumTags != 0 {
		fmt.Fprintf(b, "\tmax_rndv_hdr_size:\t\t%d\n", uint32(tm.MaxRndvHdrSize))
		fmt.Fprintf(b, "\tmax_num_tags:\t\t\t%d\n", uint32(tm.MaxNumTags))
		fmt.Fprintf(b, "\tmax_ops:\t\t\t%d\n", uint32(tm.MaxOps))
		fmt.Fprintf(b, "\tmax_sge:\t\t\t%d\n", uint32(tm.MaxSGE))
		b.WriteString("\tflags:\n")
		if tm.Flags&1 != 0 {
			b.WriteString("\t\t\t\t\tIBV_TM_CAP_RC\n")
		}
	} else {
		b.WriteString("\ttag matching not supported\n")
	}
	if m := a.CQModeration; m.MaxCount != 0 && m.MaxPeriod != 0 {
		fmt.Fprintf(b, "\n\tcq moderation caps:\n\t\tmax_cq_count:\t%d\n\t\tmax_cq_period:\t%d us\n\n", m.MaxCount, m.MaxPeriod)
	}
	if a.MaxDMSize != 0 {
		fmt.Fprintf(b, "\tmaximum available device memory:\t%dBytes\n\n", a.MaxDMSize)
	}
	fmt.Fprintf(b, "\tnum_comp_vectors:\t\t%d\n", h.compVectors)
}

// port writes one port's section, ending with its empty line.
func (h *hca) port(b *strings.Builder, p *port, verbose bool) {
	a := &p.attr
	fmt.Fprintf(b, "\t\tport:\t%d\n", p.num)
	fmt.Fprintf(b, "\t\t\tstate:\t\t\t%s (%d)\n", portStateName(a.State), a.State)
	fmt.Fprintf(b, "\t\t\tmax_mtu:\t\t%s (%d)\n", mtuName(a.MaxMTU), a.MaxMTU)
	fmt.Fprintf(b, "\t\t\tactive_mtu:\t\t%s (%d)\n", mtuName(a.ActiveMTU), a.ActiveMTU)
	fmt.Fprintf(b, "\t\t\tsm_lid:\t\t\t%d\n", a.SMLID)
	fmt.Fprintf(b, "\t\t\tport_lid:\t\t%d\n", a.LID)
	fmt.Fprintf(b, "\t\t\tport_lmc:\t\t0x%02x\n", a.LMC)
	fmt.Fprintf(b, "\t\t\tlink_layer:\t\t%s\n", linkLayerName(a.LinkLayer))
	if verbose {
		fmt.Fprintf(b, "\t\t\tmax_msg_sz:\t\t0x%x\n", a.MaxMsgSize)
		fmt.Fprintf(b, "\t\t\tport_cap_flags:\t\t0x%08x\n", a.PortCapFlags)
		fmt.Fprintf(b, "\t\t\tport_cap_flags2:\t0x%04x\n", a.PortCapFlags2)
		fmt.Fprintf(b, "\t\t\tmax_vl_num:\t\t%s (%d)\n", vlName(a.MaxVLNum), a.MaxVLNum)
		fmt.Fprintf(b, "\t\t\tbad_pkey_cntr:\t\t0x%x\n", a.BadPKeyCntr)
		fmt.Fprintf(b, "\t\t\tqkey_viol_cntr:\t\t0x%x\n", a.QKeyViolCntr)
		fmt.Fprintf(b, "\t\t\tsm_sl:\t\t\t%d\n", a.SMSL)
		fmt.Fprintf(b, "\t\t\tpkey_tbl_len:\t\t%d\n", a.PKeyTableLen)
		fmt.Fprintf(b, "\t\t\tgid_tbl_len:\t\t%d\n", i32(a.GIDTableLen))
		fmt.Fprintf(b, "\t\t\tsubnet_timeout:\t\t%d\n", a.SubnetTimeout)
		fmt.Fprintf(b, "\t\t\tinit_type_reply:\t%d\n", a.InitTypeReply)
		fmt.Fprintf(b, "\t\t\tactive_width:\t\t%sX (%d)\n", widthName(a.ActiveWidth), a.ActiveWidth)
		// libibverbs since v49 shows active_speed_ex when the kernel sets it.
		speed := uint32(a.ActiveSpeed)
		if a.ActiveSpeedEx != 0 {
			speed = a.ActiveSpeedEx
		}
		fmt.Fprintf(b, "\t\t\tactive_speed:\t\t%s (%d)\n", speedName(speed), speed)
		if h.transport == uverbs.TransportIB {
			fmt.Fprintf(b, "\t\t\tphys_state:\t\t%s (%d)\n", physStateName(a.PhysState), a.PhysState)
		}
		for _, g := range p.gids {
			gidLine(b, &g, a.LinkLayer)
		}
	}
	b.WriteString("\n")
}

// gidLine writes one GID entry as ibv_devinfo does: IB and RoCE v1 GIDs as
// eight groups of four hex digits, RoCE v2 GIDs as IPv6 addresses, with
// the type after them on Ethernet. Like ibv_devinfo it skips an entry
// whose low 64 bits (the interface id) are zero.
func gidLine(b *strings.Builder, g *uverbs.GIDEntry, ll uverbs.LinkLayer) {
	if [8]byte(g.GID[8:]) == [8]byte{} {
		return
	}
	typ := "RoCE v1"
	if g.Type == uverbs.GIDTypeRoCEv2 {
		typ = "RoCE v2"
	}
	suffix := ""
	if ll == uverbs.LinkLayerEthernet {
		suffix = ", " + typ
	}
	if g.Type == uverbs.GIDTypeRoCEv2 {
		fmt.Fprintf(b, "\t\t\tGID[%3d]:\t\t%s%s\n", g.Index, inet6.Ntop(g.GID), suffix)
		return
	}
	var hex strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			hex.WriteByte(':')
		}
		fmt.Fprintf(&hex, "%02x%02x", g.GID[i], g.GID[i+1])
	}
	fmt.Fprintf(b, "\t\t\tGID[%3d]:\t\t%s%s\n", g.Index, hex.String(), suffix)
}

// portGIDs picks port's entries out of a GID table, in index order.
func portGIDs(table []uverbs.GIDEntry, num uint8) []uverbs.GIDEntry {
	var out []uverbs.GIDEntry
	for _, e := range table {
		if e.Port == num {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(x, y uverbs.GIDEntry) int { return x.Index - y.Index })
	return out
}
