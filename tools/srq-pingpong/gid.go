package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

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
