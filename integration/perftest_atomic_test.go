//go:build integration

package integration

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// perftestDest is perftest's pingpong_dest as its TCP exchange carries it
// (KEY_PRINT_FMT_GID: lid:out_reads:qpn:psn:rkey:vaddr:16 GID bytes:srqn:,
// 107 characters and a NUL).
type perftestDest struct {
	outReads, qpn, psn, rkey uint32
	vaddr                    uint64
	gid                      uverbs.GID
}

const perftestMsgLen = 108

func (d perftestDest) marshal() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", 0, d.outReads, d.qpn, d.psn, d.rkey, d.vaddr)
	for _, c := range d.gid {
		fmt.Fprintf(&b, "%02x:", c)
	}
	fmt.Fprintf(&b, "%08x:", 0)
	out := make([]byte, perftestMsgLen)
	copy(out, b.String())
	return out
}

func parsePerftestDest(msg []byte) (perftestDest, error) {
	s := string(msg)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(s, ":")
	if len(f) < 23 {
		return perftestDest{}, fmt.Errorf("perftest record %q: %d fields", s, len(f))
	}
	var d perftestDest
	var v [5]uint64
	for i, p := range []struct {
		s    string
		bits int
	}{{f[1], 32}, {f[2], 32}, {f[3], 32}, {f[4], 32}, {f[5], 64}} {
		n, err := strconv.ParseUint(p.s, 16, p.bits)
		if err != nil {
			return d, fmt.Errorf("perftest record %q: %v", s, err)
		}
		v[i] = n
	}
	d.outReads, d.qpn, d.psn, d.rkey, d.vaddr = uint32(v[0]), uint32(v[1]), uint32(v[2]), uint32(v[3]), v[4]
	for i := range 16 {
		n, err := strconv.ParseUint(f[6+i], 16, 8)
		if err != nil {
			return d, fmt.Errorf("perftest record %q: GID: %v", s, err)
		}
		d.gid[i] = byte(n)
	}
	return d, nil
}

// perftestServer speaks one side of perftest's TCP exchange (no rdma_cm)
// for a half-duplex BW test: the server reads the other side's part of an
// exchange first, then writes its own; the client the other way round.
type perftestServer struct {
	t      *testing.T
	conn   net.Conn
	client bool
}

func (s *perftestServer) xchg(mine []byte) []byte {
	s.t.Helper()
	theirs := make([]byte, len(mine))
	if s.client {
		if _, err := s.conn.Write(mine); err != nil {
			s.t.Fatalf("perftest exchange: write: %v", err)
		}
	}
	if _, err := io.ReadFull(s.conn, theirs); err != nil {
		s.t.Fatalf("perftest exchange (%d bytes): read: %v", len(mine), err)
	}
	if !s.client {
		if _, err := s.conn.Write(mine); err != nil {
			s.t.Fatalf("perftest exchange: write: %v", err)
		}
	}
	return theirs
}

// perftest's page-sized cycle buffer and cache-line step, which the Go
// side announces (perftest takes the larger of both sides').
const cycle, stride = 4096, 64

// servePerftest plays the server of a perftest BW tool (rdma-core's
// perftest, no rdma_cm) on e's QP with target as the memory the client
// addresses, runs the C client on rxe1 with args, and returns its output.
// With ok false the client is expected to fail once it runs (a completion
// error): the rest of the exchange may then break off, and the client's
// error is returned in the output instead of failing the test.
func servePerftest(t *testing.T, e *qpEnd, target *uverbs.MR, ok bool, tool string, args ...string) string {
	t.Helper()
	devs := devices(t, 2)
	ln, err := net.Listen("tcp", "10.99.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	cli := startPeer(t, 2*time.Minute, tool, append([]string{"-d", devs[1], "-x", gidArg(t, devs[1]), "-F", "-p", strconv.Itoa(port)},
		append(args, "10.99.0.1")...)...)
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v\n%s", err, cli.out.String())
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(90 * time.Second))
	s := &perftestServer{t: t, conn: conn}

	version := make([]byte, 16) // char version[MAX_VERSION]
	copy(version, "6.06")
	t.Logf("client perftest version %q", strings.TrimRight(string(s.xchg(version)), "\x00"))
	be := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	s.xchg(be(cycle))  // cycle_buffer
	s.xchg(be(stride)) // cache_line_size
	mtu := []byte{byte('0' + e.port.ActiveMTU), 0}
	if rem := s.xchg(mtu); rem[0] != mtu[0] {
		t.Logf("client MTU %q, ours %q", rem[:1], mtu[:1])
	}

	const outReads = 16
	mine := perftestDest{outReads: outReads, qpn: e.qp.Num(), psn: psn(e.qp), rkey: target.RKey(), vaddr: target.Addr(), gid: e.gid}
	peer, err := parsePerftestDest(s.xchg(mine.marshal()))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client QPN %#x PSN %#x out_reads %d GID %v", peer.qpn, peer.psn, peer.outReads, peer.gid)
	q := e.qp
	if err := q.ToInit(qp.InitParams{Access: allRemote}); err != nil {
		t.Fatal(err)
	}
	if err := q.ToRTR(qp.RTRParams{DestQPN: peer.qpn, RQPSN: peer.psn, PathMTU: e.port.ActiveMTU, DGID: peer.gid,
		SGID: e.sgid, MaxDestRdAtomic: outReads}); err != nil {
		t.Fatal(err)
	}
	if err := q.ToRTS(qp.RTSParams{SQPSN: psn(q), MaxRdAtomic: uint8(max(1, min(peer.outReads, 16)))}); err != nil {
		t.Fatal(err)
	}
	s.xchg(mine.marshal()) // the "remote" round
	s.xchg(mine.marshal()) // after RTR
	if !ok {
		<-cli.done
		if cli.err == nil {
			t.Fatalf("%s client succeeded, want a failure:\n%s", tool, cli.out.String())
		}
		return cli.out.String() + "\n" + cli.err.Error()
	}
	s.xchg(mine.marshal()) // the client has finished its iterations
	for range 5 {          // size, iters, peak, average, message rate
		s.xchg(make([]byte, 8))
	}
	s.xchg(mine.marshal()) // close
	conn.Write([]byte("done\x00"))
	return cli.wait(t)
}

// A perftest ib_atomic_bw client (C, rxe1) runs FETCH_AND_ADD against
// memory the Go side registered on rxe0 behind a Go RC QP, connected
// through perftest's own exchange spoken by the test. Every one of the
// client's adds (+1 each, perftest's ATOMIC_ADD_VALUE) must be in Go's
// memory: the 8-byte words sum to the iteration count, and only words at
// perftest's cache-line stride inside its cycle buffer were touched.
func TestPerftestAtomicClientIntoGoMemory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		typ   string
		iters int
	}{
		{"FETCH_AND_ADD", "FETCH_AND_ADD", 1000},
		{"CMP_AND_SWAP", "CMP_AND_SWAP", 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := devices(t, 2)
			e := openEnd(t, devs[0], endOpts{})
			target := extraMR(t, e, 2*cycle, uverbs.AccessLocalWrite|allRemote)
			mem := target.Buffer().Bytes()
			clear(mem)
			if tc.typ == "CMP_AND_SWAP" {
				// perftest compares with 0 and swaps in 0: words that
				// are 0 stay 0, others miss. Mark every word to see that
				// none is written.
				for i := 0; i < len(mem); i += 8 {
					binary.NativeEndian.PutUint64(mem[i:], 0x5a5a)
				}
			}

			out := servePerftest(t, e, target, true, "ib_atomic_bw", "-A", tc.typ, "-n", strconv.Itoa(tc.iters))
			if line := perftestLine.FindString(out); line != "" {
				t.Logf("ib_atomic_bw client: %s", strings.TrimSpace(line))
			}

			var sum uint64
			touched := map[int]uint64{}
			for off := 0; off < len(mem); off += 8 {
				v := binary.NativeEndian.Uint64(mem[off:])
				if tc.typ == "CMP_AND_SWAP" {
					if v != 0x5a5a {
						t.Fatalf("CAS (compare 0) changed the word at %d to %#x", off, v)
					}
					continue
				}
				if v != 0 {
					touched[off] = v
					sum += v
				}
			}
			if tc.typ == "CMP_AND_SWAP" {
				return
			}
			if sum != uint64(tc.iters) {
				t.Fatalf("the adds in Go's memory sum to %d, want %d (%d words touched)", sum, tc.iters, len(touched))
			}
			for off := range touched {
				if off%stride != 0 || off >= cycle {
					t.Fatalf("word at offset %d touched (outside perftest's stride %d / cycle %d)", off, stride, cycle)
				}
			}
			t.Logf("%d adds over %d words (e.g. word 0 = %d)", sum, len(touched), touched[0])
		})
	}
}

// The other direction: a Go client speaks perftest's exchange to an
// ib_atomic_bw server (C, rxe0) and runs fetch-and-adds (+3) on one word
// of the memory the C server registered. The old values come back in
// steps of 3 from the word's initial value, and a final add of 0 shows
// the total.
func TestGoAtomicClientIntoPerftestMemory(t *testing.T) {
	devs := devices(t, 2)
	const port, n = 18641, 200
	srv := startPeer(t, 2*time.Minute, "ib_atomic_bw", "-d", devs[0], "-x", gidArg(t, devs[0]), "-F", "-A", "FETCH_AND_ADD", "-n", "5", "-p", strconv.Itoa(port))
	waitListening(t, srv, port, 30*time.Second)
	e := openEnd(t, devs[1], endOpts{bufSize: 8 * (n + 2)})
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("10.99.0.1", strconv.Itoa(port)), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(90 * time.Second))
	s := &perftestServer{t: t, conn: conn, client: true}
	version := make([]byte, 16)
	copy(version, "6.06")
	s.xchg(version)
	be := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	s.xchg(be(4096))
	s.xchg(be(64))
	s.xchg([]byte{byte('0' + e.port.ActiveMTU), 0})
	mine := perftestDest{outReads: 16, qpn: e.qp.Num(), psn: psn(e.qp), rkey: e.mr.RKey(), vaddr: e.mr.Addr(), gid: e.gid}
	peer, err := parsePerftestDest(s.xchg(mine.marshal()))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server QPN %#x rkey %#x vaddr %#x out_reads %d", peer.qpn, peer.rkey, peer.vaddr, peer.outReads)
	q := e.qp
	if err := q.ToInit(qp.InitParams{Access: allRemote}); err != nil {
		t.Fatal(err)
	}
	if err := q.ToRTR(qp.RTRParams{DestQPN: peer.qpn, RQPSN: peer.psn, PathMTU: e.port.ActiveMTU, DGID: peer.gid,
		SGID: e.sgid, MaxDestRdAtomic: 16}); err != nil {
		t.Fatal(err)
	}
	if err := q.ToRTS(qp.RTSParams{SQPSN: psn(q), MaxRdAtomic: uint8(max(1, min(peer.outReads, 16)))}); err != nil {
		t.Fatal(err)
	}
	s.xchg(mine.marshal())
	s.xchg(mine.marshal())

	word := peer.vaddr + 64 // a word of the server's buffer
	var first uint64
	for i := range n {
		post(t, e, qp.SendWR{ID: uint64(i), Opcode: qp.AtomicFetchAndAdd, Flags: qp.Signaled, RemoteAddr: word, RKey: peer.rkey,
			CompareAdd: 3, SGEs: []uverbs.SGE{mustSGE(t, e.mr, 8*i, 8)}})
		w := completion(t, e)
		if w.Status != 0 || w.Opcode != 4 {
			t.Fatalf("FAA %d: %v %v", i, w.Status, w.Opcode)
		}
		old := binary.NativeEndian.Uint64(e.buf.Bytes()[8*i:])
		if i == 0 {
			first = old
		} else if old != first+3*uint64(i) {
			t.Fatalf("FAA %d returned %d, want %d", i, old, first+3*uint64(i))
		}
	}
	// A last add of 0 reads the word (the C server's QP grants atomics only).
	post(t, e, qp.SendWR{ID: 999, Opcode: qp.AtomicFetchAndAdd, Flags: qp.Signaled, RemoteAddr: word, RKey: peer.rkey,
		SGEs: []uverbs.SGE{mustSGE(t, e.mr, 8*n, 8)}})
	if w := completion(t, e); w.Status != 0 {
		t.Fatalf("read back: %v", w.Status)
	}
	if got := binary.NativeEndian.Uint64(e.buf.Bytes()[8*n:]); got != first+3*n {
		t.Fatalf("the word holds %d after %d adds of 3 from %d", got, n, first)
	}
	t.Logf("%d FAAs on the C server's word: %d → %d", n, first, first+3*n)

	s.xchg(mine.marshal()) // finished
	rep := make([]byte, 8)
	binary.BigEndian.PutUint64(rep, 8)
	s.xchg(rep) // size
	binary.BigEndian.PutUint64(rep, n)
	s.xchg(rep) // iters
	for range 3 {
		s.xchg(make([]byte, 8))
	}
	s.xchg(mine.marshal()) // close
	conn.Write([]byte("done\x00"))
	out := srv.wait(t)
	if line := perftestLine.FindString(out); line != "" {
		t.Logf("ib_atomic_bw server printed: %s", strings.TrimSpace(line))
	}
}
