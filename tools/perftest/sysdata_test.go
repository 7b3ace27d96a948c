package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// local is what this tool announces in the tests: perftest's page size and
// cache line, MTU 1024.
var local = sysData{pageSize: pageSize, cacheLine: cacheLine, mtu: 3}

// lyingPeer connects this tool's real TCP exchanger to a scripted peer
// over loopback: with toolServes the tool accepts (acceptOne) and the peer
// dials, else the tool dials (dialExchanger). The peer writes says, closes
// its sending half and reads whatever the tool sends until the tool
// closes. The session's exchanges time out after limit.
func lyingPeer(t testing.TB, toolServes bool, says []byte, limit time.Duration) *session {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	peers := make(chan net.Conn, 1)
	var x *tcpExchanger
	if toolServes {
		go func() {
			c, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				c = nil
			}
			peers <- c
		}()
		x, err = acceptOne(ln)
	} else {
		go func() {
			c, err := ln.Accept()
			ln.Close()
			if err != nil {
				c = nil
			}
			peers <- c
		}()
		x, err = dialExchanger("127.0.0.1", port)
	}
	if err != nil {
		t.Fatal(err)
	}
	peer := <-peers
	if peer == nil {
		t.Fatal("the scripted peer did not connect")
	}
	x.timeout = limit
	go func() {
		peer.Write(says)
		peer.(*net.TCPConn).CloseWrite()
	}()
	go func() {
		io.Copy(io.Discard, peer)
		peer.Close()
	}()
	t.Cleanup(func() { x.Close() })
	return &session{x: x}
}

// sysMsgs is a peer's version, page size, cache line and MTU messages
// as they go on the wire.
func sysMsgs(version string, page, line uint32, mtu string) []byte {
	var b bytes.Buffer
	var v [versionLen]byte
	copy(v[:], version)
	b.Write(v[:])
	binary.Write(&b, binary.BigEndian, page)
	binary.Write(&b, binary.BigEndian, line)
	var m [2]byte
	copy(m[:], mtu)
	b.Write(m[:])
	return b.Bytes()
}

// checkUsable runs what the tool does with agreed values right after the
// exchange: the header's MTU, the buffer of n QPs with size-byte
// messages, and the bandwidth loop's address stepping for every size of
// -a. It fails t where the values would panic or map more than the bound.
func checkUsable(t testing.TB, agreed sysData, n int) {
	t.Helper()
	if agreed.mtu < 1 || agreed.mtu > 5 {
		t.Fatalf("agreed MTU enum %d", agreed.mtu)
	}
	o, err := parseOptions(mustTest(t, "ib_write_bw"), []string{"-q", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	printTestInfo(io.Discard, o, "rxe0", agreed.mtu, 0, 1)
	// newEnd maps roundUp(2·n·BUFF_SIZE, cycle) + cycle bytes.
	if total := 2*n*bufferSize(2, agreed.pageSize) + agreed.pageSize; total > (2*n+1)*maxPeerPageSize {
		t.Fatalf("page size %d: %d QPs would map %d bytes", agreed.pageSize, n, total)
	}
	for size := 2; size <= agreed.pageSize/2; size *= 2 {
		r := &bwRun{e: &end{cycle: agreed.pageSize, line: agreed.cacheLine}, size: size}
		r.nextAddr(0, 0, 0)
	}
}

func mustTest(t testing.TB, name string) test {
	tt, ok := testByName(name)
	if !ok {
		t.Fatalf("no test %s", name)
	}
	return tt
}

// What a peer announces is checked as it arrives, by either end: the
// values issue 26 reproduced (a page size that mapped 4 GiB per window, a
// cache line that divided by zero in the first post, the version "NaN")
// are refused with the field and the value; an MTU that is no enum (it
// panicked in the header) leaves this side's, as perftest does.
func TestPeerSystemData(t *testing.T) {
	for _, c := range []struct {
		name     string
		says     []byte
		refusal  string // "" for accepted
		agreed   sysData
		warnings string
	}{
		{"Debian's perftest", sysMsgs("6.06", 4096, 64, "3"), "", sysData{4096, 64, 3}, ""},
		{"newer perftest, 64 KiB pages, larger MTU", sysMsgs("6.29", 65536, 128, "5"), "", sysData{65536, 128, 3}, ""},
		{"smaller MTU", sysMsgs("5.70", 4096, 64, "1"), "", sysData{4096, 64, 1}, ""},
		{"small page and line", sysMsgs("5.7", 1024, 32, "3"), "", sysData{4096, 64, 3}, ""},
		{"page size 0xfffff000", sysMsgs("6.06", 0xfffff000, 64, "3"), "page size 0xfffff000", sysData{}, ""},
		{"page size 128 KiB", sysMsgs("6.06", 128<<10, 64, "3"), "page size 0x20000", sysData{}, ""},
		{"page size 0", sysMsgs("6.06", 0, 64, "3"), "page size 0x0", sysData{}, ""},
		{"page size not a power of two", sysMsgs("6.06", 4097, 64, "3"), "page size 0x1001", sysData{}, ""},
		{"cache line over the page", sysMsgs("6.06", 4096, 8192, "3"), "cache line size 0x2000", sysData{}, ""},
		{"cache line 0", sysMsgs("6.06", 4096, 0, "3"), "cache line size 0x0", sysData{}, ""},
		{"cache line not a power of two", sysMsgs("6.06", 4096, 96, "3"), "cache line size 0x60", sysData{}, ""},
		{"version NaN", sysMsgs("NaN", 4096, 64, "3"), `version "NaN"`, sysData{}, ""},
		{"version inf", sysMsgs("inf", 4096, 64, "3"), `version "inf"`, sysData{}, ""},
		{"version with a tail", sysMsgs("6.06abc", 4096, 64, "3"), `version "6.06abc"`, sysData{}, ""},
		{"version empty", sysMsgs("", 4096, 64, "3"), `version ""`, sysData{}, ""},
		{"version 1e3", sysMsgs("1e3", 4096, 64, "3"), `version "1e3"`, sysData{}, ""},
		{"MTU -1", sysMsgs("6.06", 4096, 64, "-1"), "", sysData{4096, 64, 3}, `MTU "-1"`},
		{"MTU 0", sysMsgs("6.06", 4096, 64, "0"), "", sysData{4096, 64, 3}, `MTU "0"`},
		{"MTU 9", sysMsgs("6.06", 4096, 64, "9"), "", sysData{4096, 64, 3}, `MTU "9"`},
		{"MTU not a number", sysMsgs("6.06", 4096, 64, "x"), "", sysData{4096, 64, 3}, `MTU "x"`},
	} {
		for _, serves := range []bool{false, true} {
			end := "client"
			if serves {
				end = "server"
			}
			t.Run(c.name+"/"+end, func(t *testing.T) {
				s := lyingPeer(t, serves, c.says, 5*time.Second)
				var warn bytes.Buffer
				agreed, err := s.agreeSystem(local, true, &warn)
				if c.refusal != "" {
					if !errors.Is(err, errPeer) || !strings.Contains(err.Error(), c.refusal) {
						t.Fatalf("agreeSystem = %+v, %v; want a refusal naming %s", agreed, err, c.refusal)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if agreed != c.agreed {
					t.Errorf("agreed %+v, want %+v", agreed, c.agreed)
				}
				if c.warnings == "" && warn.Len() > 0 || !strings.Contains(warn.String(), c.warnings) {
					t.Errorf("warnings %q, want %q", warn.String(), c.warnings)
				}
				checkUsable(t, agreed, 4)
			})
		}
	}
}

// Versions compare as the numbers they spell (perftest's atof): 5.8 is
// newer than 5.70, 5.69 older.
func TestPeerVersionOrder(t *testing.T) {
	for _, c := range []struct {
		v  string
		ok bool
	}{{"5.8", true}, {"5.70", true}, {"5.7", true}, {"6.06", true}, {"10", true}, {"5.69", false}, {"4.5", false}, {"5", false}} {
		s := lyingPeer(t, false, sysMsgs(c.v, 4096, 64, "3"), 5*time.Second)
		_, err := s.agreeSystem(local, true, io.Discard)
		if (err == nil) != c.ok {
			t.Errorf("version %q: %v, want accepted %v", c.v, err, c.ok)
		}
	}
}

// Records are checked before they are used: a QP number or PSN wider than
// its 24 bits, or a record that does not parse, is refused with the value.
func TestPeerRecords(t *testing.T) {
	good := dest{qpn: 0x12, psn: 0x210e32, rkey: 0x3fc, vaddr: 0x5602}
	for _, c := range []struct {
		name    string
		rec     func() []byte
		refusal string
	}{
		{"good", func() []byte { return record(good) }, ""},
		{"QPN over 24 bits", func() []byte { d := good; d.qpn = 0x1000000; return record(d) }, "QP number 0x1000000"},
		{"PSN over 24 bits", func() []byte { d := good; d.psn = 0xffffffff; return record(d) }, "PSN 0xffffffff"},
		{"garbage", func() []byte { return make([]byte, destLen) }, "address record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := lyingPeer(t, true, append(record(good), c.rec()...), 5*time.Second)
			rem, err := s.shakeRecords([]dest{{}, {}})
			if c.refusal == "" {
				if err != nil || rem[1] != good {
					t.Fatalf("shakeRecords = %+v, %v", rem, err)
				}
				return
			}
			if !errors.Is(err, errPeer) || !strings.Contains(err.Error(), c.refusal) {
				t.Fatalf("shakeRecords = %+v, %v; want a refusal naming %s", rem, err, c.refusal)
			}
		})
	}
}

func record(d dest) []byte {
	var b [destLen]byte
	d.marshal(&b)
	return b[:]
}

// Over RDMA CM a message is refused unless the receive took exactly its
// bytes: a shorter SEND leaves the rest of the buffer from the previous one.
func TestCMMessageLength(t *testing.T) {
	if err := checkMessageLen(cmDestLen, cmDestLen); err != nil {
		t.Fatal(err)
	}
	for _, got := range []uint32{0, 4, cmDestLen - 1} {
		err := checkMessageLen(got, cmDestLen)
		if !errors.Is(err, errPeer) || !strings.Contains(err.Error(), "where 56 were due") {
			t.Errorf("%d bytes: %v", got, err)
		}
	}
}

// exchangeAll is the whole exchange the tools run with a peer, as far as a
// host without RDMA can: versions, system data and MTU, n records, a
// bandwidth report and the closing exchange. It returns the agreed system
// data once it was agreed.
func exchangeAll(s *session, n int) (sysData, []dest, error) {
	agreed, err := s.agreeSystem(local, true, io.Discard)
	if err != nil {
		return sysData{}, nil, err
	}
	mine := make([]dest, n)
	rem, err := s.shakeRecords(mine)
	if err != nil {
		return agreed, nil, err
	}
	if _, err := s.exchangeReport(bwReport{size: 4096, iters: 1000}); err != nil {
		return agreed, rem, err
	}
	return agreed, rem, s.closeConnection(mine[0])
}

// A peer that says anything at all, to either end: the exchange ends
// with an error or with values the tool can use (checkUsable, 24-bit
// record fields), never a panic or a hang.
func FuzzPeerExchange(f *testing.F) {
	good := append(sysMsgs("6.06", 4096, 64, "3"), record(dest{qpn: 0x11, psn: 0x22})...)
	f.Add(good, false, uint8(1))
	f.Add(good, true, uint8(1))
	f.Add(sysMsgs("6.06", 0xfffff000, 64, "3"), true, uint8(3))
	f.Add(sysMsgs("6.06", 4096, 64, "-1"), false, uint8(1))
	f.Add(sysMsgs("6.06", 4096, 8192, "3"), false, uint8(1))
	f.Add(sysMsgs("NaN", 4096, 64, "3"), true, uint8(1))
	f.Add(append(good, make([]byte, 5*reportLen)...), false, uint8(1))
	f.Fuzz(func(t *testing.T, says []byte, toolServes bool, n uint8) {
		nqp := int(n%4) + 1
		s := lyingPeer(t, toolServes, says, 2*time.Second)
		start := time.Now()
		agreed, rem, err := exchangeAll(s, nqp)
		if took := time.Since(start); took > 4*time.Second {
			t.Fatalf("the exchange took %v", took)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the tool waited for a peer that had closed: %v", err)
		}
		if agreed != (sysData{}) {
			checkUsable(t, agreed, nqp)
		}
		for i, d := range rem {
			if checkRecord(i, d) != nil {
				t.Fatalf("record %d accepted: %+v", i, d)
			}
		}
	})
}
