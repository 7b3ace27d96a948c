package topology

import (
	"net"
	"testing"
)

func TestMappedGIDMatchesSysfsFormat(t *testing.T) {
	// /sys/class/infiniband/rxe0/ports/1/gids/1 for 10.99.0.1, as read in the VM.
	if got, want := MappedGID(net.ParseIP("10.99.0.1")), "0000:0000:0000:0000:0000:ffff:0a63:0001"; got != want {
		t.Errorf("MappedGID = %s, want %s", got, want)
	}
}

func TestEndpoints(t *testing.T) {
	for _, tc := range []struct {
		kind  Kind
		rdma  []string
		addrs []string
	}{
		{Veth, []string{"rxe0", "rxe1"}, []string{"10.99.0.1/24", "10.99.0.2/24"}},
		{"", []string{"rxe0", "rxe1"}, []string{"10.99.0.1/24", "10.99.0.2/24"}},
		{Loopback, []string{"rxe0"}, []string{"10.99.0.1/24"}},
	} {
		eps, err := Endpoints(tc.kind)
		if err != nil {
			t.Fatalf("%q: %v", tc.kind, err)
		}
		if len(eps) != len(tc.rdma) {
			t.Fatalf("%q: %d endpoints, want %d", tc.kind, len(eps), len(tc.rdma))
		}
		for i, e := range eps {
			if e.RDMA != tc.rdma[i] || e.Addr.String() != tc.addrs[i] {
				t.Errorf("%q[%d] = %s %s, want %s %s", tc.kind, i, e.RDMA, e.Addr.String(), tc.rdma[i], tc.addrs[i])
			}
		}
	}
	if _, err := Endpoints("ring"); err == nil {
		t.Error("an unknown topology was accepted")
	}
	if Peer(TwoVMA).String() != "10.99.1.2" || Peer(TwoVMB).String() != "10.99.1.1" || Peer(Veth) != nil {
		t.Error("two-VM peers are not each other")
	}
}
