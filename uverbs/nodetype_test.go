package uverbs

import "testing"

// Node type and board id come from sysfs; transport follows the node type
// as in libibverbs (CA, switch, router: InfiniBand; RNIC: iWARP).
func TestDeviceNodeTypeBoardID(t *testing.T) {
	f := newFakeSysfs(t, "6")
	f.device("uverbs0", "rxe0", "2", "0000:0000:0000:0001")
	f.write("class/infiniband/rxe0/node_type", "1: CA\n")
	f.device("uverbs1", "siw0", "1", "0000:0000:0000:0002")
	f.write("class/infiniband/siw0/node_type", "4: RNIC\n")
	f.write("class/infiniband/siw0/board_id", "BOARD-7\n")
	f.device("uverbs2", "odd0", "1", "0000:0000:0000:0003")
	f.write("class/infiniband/odd0/node_type", "garbage\n")
	got, err := f.devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		nt    NodeType
		tr    Transport
		trs   string
		board string
	}{{NodeCA, TransportIB, "InfiniBand", ""}, {NodeRNIC, TransportIWARP, "iWARP", "BOARD-7"}, {NodeUnknown, TransportUnknown, "invalid transport", ""}}
	for i, w := range want {
		d := got[i]
		if d.NodeType != w.nt || d.NodeType.Transport() != w.tr || d.NodeType.Transport().String() != w.trs || d.BoardID != w.board {
			t.Errorf("%s: node type %v, transport %v (%d), board %q; want %v, %s (%d), %q",
				d.Name, d.NodeType, d.NodeType.Transport(), d.NodeType.Transport(), d.BoardID, w.nt, w.trs, w.tr, w.board)
		}
	}
}
