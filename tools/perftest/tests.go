package main

import "strings"

// verb is perftest's VerbType, in its order (the numbers matter: the
// address lines print by it).
type verb int

const (
	verbSend verb = iota
	verbWrite
	verbRead
	verbAtomic
)

// testName is what the header line calls a verb (perftest's testsStr).
var testName = [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}

// atomicKind is perftest's AtomicType, in its order.
type atomicKind int

const (
	atomicCmpAndSwap atomicKind = iota
	atomicFetchAndAdd
)

var atomicName = [...]string{"CMP_AND_SWAP", "FETCH_AND_ADD"}

// test is one of the eight tools: its verb and whether it measures
// bandwidth (else latency).
type test struct {
	name string
	verb verb
	bw   bool
}

// tests are the tools this program is, by the names perftest installs.
var tests = []test{
	{"ib_send_bw", verbSend, true},
	{"ib_send_lat", verbSend, false},
	{"ib_write_bw", verbWrite, true},
	{"ib_write_lat", verbWrite, false},
	{"ib_read_bw", verbRead, true},
	{"ib_read_lat", verbRead, false},
	{"ib_atomic_bw", verbAtomic, true},
	{"ib_atomic_lat", verbAtomic, false},
}

// testByName finds a tool by its name (a path's last element counts).
func testByName(name string) (test, bool) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	for _, t := range tests {
		if t.name == name {
			return t, true
		}
	}
	return test{}, false
}
