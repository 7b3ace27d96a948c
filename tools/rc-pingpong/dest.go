package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

// dest is one end's connection data, as the two ends trade it over TCP
// before the QPs can be connected.
type dest struct {
	lid uint16
	qpn uint32 // 24 bits
	psn uint32 // 24 bits
	gid uverbs.GID
}

// msgLen is the size of the exchange message: ibv_rc_pingpong sends the
// whole buffer sized for "LLLL:QQQQQQ:PPPPPP:" plus 32 GID digits and the
// terminating NUL, 52 bytes, and reads exactly that many.
const msgLen = len("0000:000000:000000:00000000000000000000000000000000") + 1

// doneMsg is the client's last word, "done" with its NUL; the server waits
// for it before either side starts the ping-pong.
var doneMsg = [...]byte{'d', 'o', 'n', 'e', 0}

// marshal formats d as the exchange message: LID, QPN and PSN in
// zero-padded lower-case hex, then the GID as 32 hex digits in wire (byte)
// order, then NUL.
func (d dest) marshal() [msgLen]byte {
	var m [msgLen]byte
	b := fmt.Appendf(m[:0], "%04x:%06x:%06x:", d.lid, d.qpn&0xffffff, d.psn&0xffffff)
	hex.Encode(m[len(b):], d.gid[:])
	return m
}

// parseDest reads an exchange message from the peer. Like the C tool's
// sscanf("%x:%x:%x:%s") the numbers may have any width; the GID must be 32
// hex digits.
func parseDest(msg []byte) (dest, error) {
	if i := bytes.IndexByte(msg, 0); i >= 0 {
		msg = msg[:i]
	}
	f := strings.Split(string(msg), ":")
	if len(f) != 4 {
		return dest{}, fmt.Errorf("malformed address message %q", msg)
	}
	var d dest
	var nums [3]uint64
	for i, bits := range [3]int{16, 24, 24} {
		n, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return dest{}, fmt.Errorf("malformed address message %q: %w", msg, err)
		}
		nums[i] = n
	}
	d.lid, d.qpn, d.psn = uint16(nums[0]), uint32(nums[1]), uint32(nums[2])
	if len(f[3]) != 2*len(d.gid) {
		return dest{}, fmt.Errorf("malformed address message %q: GID is not %d hex digits", msg, 2*len(d.gid))
	}
	if _, err := hex.Decode(d.gid[:], []byte(f[3])); err != nil {
		return dest{}, fmt.Errorf("malformed address message %q: %w", msg, err)
	}
	return d, nil
}

// hasGlobalRoute says whether the peer's address needs a GRH: the C tool
// sets one up when the interface-ID half of the GID is non-zero.
func (d dest) hasGlobalRoute() bool {
	return binary.BigEndian.Uint64(d.gid[8:]) != 0
}

// formatGID prints a GID the way glibc's inet_ntop(AF_INET6) does: the
// longest run (of two or more) of zero groups becomes "::", and an address
// whose first 96 bits are zero or which is IPv4-mapped ends in dotted
// decimal. Go's netip differs for the IPv4-compatible form (::a.b.c.d).
func formatGID(g uverbs.GID) string {
	var w [8]uint16
	for i := range w {
		w[i] = uint16(g[2*i])<<8 | uint16(g[2*i+1])
	}
	best, bestLen := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > bestLen {
			best, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		best = -1
	}
	var sb strings.Builder
	for i := 0; i < 8; i++ {
		if best >= 0 && i >= best && i < best+bestLen {
			if i == best {
				sb.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			sb.WriteByte(':')
		}
		if i == 6 && best == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff)) {
			fmt.Fprintf(&sb, "%d.%d.%d.%d", g[12], g[13], g[14], g[15])
			return sb.String()
		}
		sb.WriteString(strconv.FormatUint(uint64(w[i]), 16))
	}
	if best >= 0 && best+bestLen == 8 {
		sb.WriteByte(':')
	}
	return sb.String()
}
