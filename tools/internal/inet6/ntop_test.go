package inet6

import (
	"net/netip"
	"testing"
)

// Expected strings are glibc 2.36's inet_ntop(AF_INET6) output for each
// address; Go's formatting differs on IPv4-compatible addresses.
func TestNtopMatchesGlibc(t *testing.T) {
	for _, tc := range []struct {
		in   [16]byte
		want string
	}{
		{[16]byte{}, "::"},
		{[16]byte{15: 1}, "::1"},
		{[16]byte{15: 2}, "::2"},
		{[16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}, "::ffff:10.99.0.1"},
		{[16]byte{12: 1, 13: 2, 14: 3, 15: 4}, "::1.2.3.4"},
		{[16]byte{0: 0xfe, 1: 0x80, 8: 0x50, 9: 0x54, 11: 0xff, 12: 0xfe, 13: 0x12, 14: 0x34, 15: 0x56}, "fe80::5054:ff:fe12:3456"},
		{netip.MustParseAddr("fe80::f0fc:51ff:fe75:5ddc").As16(), "fe80::f0fc:51ff:fe75:5ddc"},
		{[16]byte{1: 1, 7: 1}, "1:0:0:1::"},
		{[16]byte{1: 1, 9: 1, 15: 1}, "1::1:0:0:1"},
		{[16]byte{1: 1, 5: 1, 9: 1, 13: 1}, "1:0:1:0:1:0:1:0"},
		{netip.MustParseAddr("1:0:0:2:0:0:0:3").As16(), "1:0:0:2::3"},
		{netip.MustParseAddr("1:0:0:2:3:0:0:4").As16(), "1::2:3:0:0:4"},
		{netip.MustParseAddr("1:2:3:4:5:6:7:0").As16(), "1:2:3:4:5:6:7:0"},
		{netip.MustParseAddr("1:2:3:4:5:6::").As16(), "1:2:3:4:5:6::"},
		{[16]byte{8: 0xff, 9: 0xff, 12: 1, 13: 2, 14: 3, 15: 4}, "::ffff:0:102:304"},
		{[16]byte{11: 1}, "::1:0:0"},
		{[16]byte{0: 0xff, 1: 0x02, 11: 1, 12: 0xff}, "ff02::1:ff00:0"},
		{[16]byte{1: 1}, "1::"},
		{[16]byte{7: 5}, "0:0:0:5::"},
	} {
		if got := Ntop(tc.in); got != tc.want {
			t.Errorf("Ntop(% x) = %q, want %q", tc.in[:], got, tc.want)
		}
	}
}
