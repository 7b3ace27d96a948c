// Package inet6 formats IPv6 addresses (and so RoCE GIDs) the way glibc
// does, for the tools whose output is compared with rdma-core's C tools.
package inet6

import "fmt"

// Ntop formats a 16-byte address as glibc's inet_ntop(AF_INET6) does:
// lower-case hex words, the first longest run of two or more zero words as
// "::", and the last 32 bits in dotted decimal for IPv4-compatible
// (::a.b.c.d with a non-zero seventh word) and IPv4-mapped (::ffff:a.b.c.d)
// addresses. Go's netip differs for the IPv4-compatible form.
func Ntop(a [16]byte) string {
	var w [8]uint16
	for i := range w {
		w[i] = uint16(a[2*i])<<8 | uint16(a[2*i+1])
	}
	bestBase, bestLen := -1, 0
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
			bestBase, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		bestBase = -1
	}
	var out []byte
	for i := 0; i < 8; i++ {
		if bestBase >= 0 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				out = append(out, ':')
			}
			continue
		}
		if i != 0 {
			out = append(out, ':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff)) {
			out = fmt.Appendf(out, "%d.%d.%d.%d", a[12], a[13], a[14], a[15])
			return string(out)
		}
		out = fmt.Appendf(out, "%x", w[i])
	}
	if bestBase >= 0 && bestBase+bestLen == 8 {
		out = append(out, ':')
	}
	return string(out)
}
