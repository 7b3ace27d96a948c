package main

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"strings"
)

// errPeer marks a refusal of what the peer sent: every such error names
// the field and the value, and the run ends before anything is sized or
// posted from it.
var errPeer = errors.New("refusing the peer's data")

// maxPeerPageSize bounds the page size a peer may announce: the largest
// page of the architectures RDMA runs on (arm64, ppc64: 64 KiB). Every QP
// sizes two windows of at least this, so without a bound one number from
// the first TCP client decides how much this side maps (4 GiB per window
// for 0xfffff000).
const maxPeerPageSize = 64 << 10

// minPeerVersion is the oldest perftest whose exchange this tool speaks
// (check_version_compatibility).
const minPeerVersion = 5.70

// sysData is what each side announces before the address records: its
// page size (perftest's cycle buffer) and cache line (check_sys_data) and
// its active MTU as the ibv_mtu enum (check_mtu).
type sysData struct {
	pageSize  int
	cacheLine int
	mtu       int
}

// agreeSystem trades the versions (unless versions is false, as
// --dont_xchg_versions asks), the system data and the MTU with the peer,
// checking each answer as it arrives, and returns what both sides then
// use: the larger page size and cache line, the smaller MTU. A peer whose
// version is not a perftest version of at least 5.70, whose page size is
// no power of two up to maxPeerPageSize, or whose cache line is no power
// of two up to its page size is refused (errPeer). A peer MTU outside the
// enum's 1..5 leaves this side's, as perftest's check_mtu does, with a
// note on warn.
func (s *session) agreeSystem(mine sysData, versions bool, warn io.Writer) (sysData, error) {
	if versions {
		if err := s.exchangeVersions(); err != nil {
			return sysData{}, err
		}
	}
	page, err := s.exchangeU32(uint32(mine.pageSize))
	if err != nil {
		return sysData{}, err
	}
	if !isPow2(page) || page > maxPeerPageSize {
		return sysData{}, fmt.Errorf("%w: page size %#x (%d) is not a power of two up to %d", errPeer, page, page, maxPeerPageSize)
	}
	line, err := s.exchangeU32(uint32(mine.cacheLine))
	if err != nil {
		return sysData{}, err
	}
	if !isPow2(line) || line > page {
		return sysData{}, fmt.Errorf("%w: cache line size %#x (%d) is not a power of two up to its page size %d", errPeer, line, line, page)
	}
	peerMTU, err := s.exchangeMTU(mine.mtu)
	if err != nil {
		return sysData{}, err
	}
	agreed := sysData{pageSize: max(int(page), mine.pageSize), cacheLine: max(int(line), mine.cacheLine), mtu: mine.mtu}
	if m, err := strconv.Atoi(peerMTU); err != nil || m < 1 || m > 5 {
		fmt.Fprintf(warn, " The peer's MTU %q is no MTU (1..5); using this side's %d\n", peerMTU, mtuBytes(mine.mtu))
	} else {
		agreed.mtu = min(mine.mtu, m)
	}
	return agreed, nil
}

// isPow2 reports whether v is a power of two.
func isPow2(v uint32) bool { return bits.OnesCount32(v) == 1 }

// parseVersion reads a perftest version ("6.06"): digits, and a dot and
// more digits, compared as the number they spell, as perftest's atof does.
// perftest would also take "NaN", "inf" or "6.06abc"; they are no
// versions.
func parseVersion(s string) (float64, bool) {
	whole, frac, dotted := strings.Cut(s, ".")
	if !digits(whole) || dotted && !digits(frac) {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// digits reports whether s is a short, non-empty run of decimal digits.
func digits(s string) bool {
	if s == "" || len(s) > versionLen {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// checkRecord refuses an address record whose QP number or PSN does not
// fit the 24 bits they have on the wire; i is the QP it is for.
func checkRecord(i int, d dest) error {
	if d.qpn > 0xffffff {
		return fmt.Errorf("%w: QP %d's record has QP number %#x, wider than 24 bits", errPeer, i, d.qpn)
	}
	if d.psn > 0xffffff {
		return fmt.Errorf("%w: QP %d's record has PSN %#x, wider than 24 bits", errPeer, i, d.psn)
	}
	return nil
}
