package framecheck

import "testing"

func TestCheckerCounts(t *testing.T) {
	var c Checker
	sizes := []int{1, 2, 7, 8, 9, 11, 12, 13, 100, 9000}
	buf := make([]byte, 9000)
	for seq := range uint64(3000) {
		n := sizes[seq%uint64(len(sizes))]
		Fill(buf[:n], seq)
		if seq >= 500 && seq <= 502 { // lost
			continue
		}
		if seq == 1009 { // size 9000: flip a filler byte
			buf[5000] ^= 1
		}
		c.Check(buf[:n])
		if seq == 2009 {
			// A duplicate is only recognisable with the whole sequence
			// number: a 1-byte frame repeated reads as 255 lost.
			c.Check(buf[:n])
		}
	}
	c.Expect(3005)
	if c.Lost != 3+5 || c.Corrupt != 1 || c.Duplicate != 1 {
		t.Fatalf("lost %d corrupt %d dup %d; want 8, 1, 1", c.Lost, c.Corrupt, c.Duplicate)
	}
	if got := c.LostRanges[:c.NLostRanges]; len(got) != 2 || got[0] != (Range{500, 502}) || got[1] != (Range{3000, 3004}) {
		t.Errorf("lost ranges %v, want 500..502 and 3000..3004", got)
	}
}

func TestCheckerSmallFramesAcrossWraps(t *testing.T) {
	var c Checker
	var b [1]byte
	for seq := range uint64(1000) {
		if seq == 300 {
			continue
		}
		Fill(b[:], seq)
		c.Check(b[:])
	}
	if c.Lost != 1 || c.Corrupt != 0 || c.Duplicate != 0 {
		t.Fatalf("lost %d corrupt %d dup %d", c.Lost, c.Corrupt, c.Duplicate)
	}
}

func TestCheckAllocs(t *testing.T) {
	var c Checker
	b := make([]byte, 4096)
	seq := uint64(0)
	if a := testing.AllocsPerRun(100, func() { Fill(b, seq); c.Check(b); seq++ }); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

func TestCheckerNamesTheFirstLostRanges(t *testing.T) {
	var c Checker
	b := make([]byte, 16)
	for seq := uint64(0); seq < 100*(MaxLostRanges+4); seq += 100 {
		Fill(b, seq) // 1..99 of every hundred lost
		c.Check(b)
	}
	if c.Lost != 99*(MaxLostRanges+3) || c.NLostRanges != MaxLostRanges {
		t.Fatalf("lost %d in %d ranges", c.Lost, c.NLostRanges)
	}
	for i, r := range c.LostRanges {
		if want := (Range{uint64(100*i + 1), uint64(100*i + 99)}); r != want {
			t.Errorf("range %d: %v, want %v", i, r, want)
		}
	}
}
