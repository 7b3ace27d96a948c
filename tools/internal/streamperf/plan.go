package streamperf

// testSizes are the sizes of the default runs; those marked all only with
// -S all (test_size[] in the C tools).
var testSizes = []struct {
	size int
	all  bool
}{
	{1 << 6, false},
	{1 << 7, true}, {1<<7 + 1<<6, true},
	{1 << 8, true}, {1<<8 + 1<<7, true},
	{1 << 9, true}, {1<<9 + 1<<8, true},
	{1 << 10, true}, {1<<10 + 1<<9, true},
	{1 << 11, true}, {1<<11 + 1<<10, true},
	{1 << 12, false}, {1<<12 + 1<<11, true},
	{1 << 13, true}, {1<<13 + 1<<12, true},
	{1 << 14, true}, {1<<14 + 1<<13, true},
	{1 << 15, true}, {1<<15 + 1<<14, true},
	{1 << 16, false}, {1<<16 + 1<<15, true},
	{1 << 17, true}, {1<<17 + 1<<16, true},
	{1 << 18, true}, {1<<18 + 1<<17, true},
	{1 << 19, true}, {1<<19 + 1<<18, true},
	{1 << 20, false}, {1<<20 + 1<<19, true},
	{1 << 21, true}, {1<<21 + 1<<20, true},
	{1 << 22, true}, {1<<22 + 1<<21, true},
}

// sizeToCount is the C tools' size_to_count: how many transfers or
// iterations a default test of that size makes.
func sizeToCount(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 1<<16:
		return 1000
	case size >= 1<<10:
		return 10000
	}
	return 100000
}

// Connection is one connection of a run and the tests made on it.
type Connection struct {
	// Inline is the rsocket inline size: -i for latency tests, 0 for
	// bandwidth tests (the C tools' opt_latency and opt_bandwidth); a
	// custom run leaves the library default, -1 here.
	Inline int
	Tests  []Test
}

// Plan is what o asks for: one custom test on one connection, or a
// connection of latency tests (one transfer each way, many iterations)
// then one of bandwidth tests (many transfers, one iteration).
func (o *Options) Plan() []Connection {
	if o.Custom {
		return []Connection{{Inline: -1, Tests: []Test{{Name: "custom", Size: o.Size, Count: o.Count, Iterations: o.Iterations}}}}
	}
	lat := Connection{Inline: o.Inline}
	bw := Connection{Inline: 0}
	for _, s := range testSizes {
		if s.all && !o.AllSizes {
			continue
		}
		name := SizeStr(int64(s.size))
		n := sizeToCount(s.size)
		lat.Tests = append(lat.Tests, Test{Name: name + "_lat", Size: s.size, Count: 1, Iterations: n})
		bw.Tests = append(bw.Tests, Test{Name: name + "_bw", Size: s.size, Count: n, Iterations: 1})
	}
	return []Connection{lat, bw}
}

// BufferLen is the length of the buffer the tests need: the largest
// transfer, and at least the 16-byte sync (the C tools' buffer is
// -S bytes even when smaller than that).
func (o *Options) BufferLen() int {
	n := SyncSize
	for _, c := range o.Plan() {
		for _, t := range c.Tests {
			n = max(n, t.Size)
		}
	}
	return n
}

// SyncSize is the length of the message each end sends the other before
// every test, the client first.
const SyncSize = 16
