//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// uvExpect is what the harness's veth topology gives device i of
// RXEVM_DEVICES: rxe0 on veth0 with 10.99.0.1, rxe1 on veth1 with 10.99.0.2.
func uvExpect(i int) (netdev string, gid uverbs.GID) {
	gid = uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: byte(i + 1)}
	return fmt.Sprintf("veth%d", i), gid
}

// uvMapped reports whether a mapping starts at addr.
func uvMapped(t *testing.T, addr uint64) bool {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(maps), fmt.Sprintf("\n%x-", addr)) || strings.HasPrefix(string(maps), fmt.Sprintf("%x-", addr))
}

func TestUverbsDiscovery(t *testing.T) {
	names := devices(t, 2)
	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]uverbs.Device{}
	for _, d := range devs {
		byName[d.Name] = d
		t.Logf("%+v", d)
	}
	for _, name := range names {
		d, ok := byName[name]
		if !ok {
			t.Errorf("%s not discovered (found %v)", name, devs)
			continue
		}
		if want := fmt.Sprintf("/dev/infiniband/uverbs%d", d.Index); d.Path != want {
			t.Errorf("%s: path %s, want %s", name, d.Path, want)
		}
		if st, err := os.Stat(d.Path); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("%s: %s is not a character device: %v", name, d.Path, err)
		}
		if d.ABIVersion < 1 || d.ABIVersion > 2 || d.CommandABI != 6 {
			t.Errorf("%s: driver ABI %d, command ABI %d", name, d.ABIVersion, d.CommandABI)
		}
		if d.NodeGUID == 0 {
			t.Errorf("%s: node GUID 0", name)
		}
	}
}

func TestUverbsQueryDevicePort(t *testing.T) {
	for _, name := range devices(t, 2) {
		ctx := uvOpen(t, name)
		if ctx.DriverID() != uverbs.DriverRXE {
			t.Errorf("%s: driver id %v, want rxe", name, ctx.DriverID())
		}
		attr, err := ctx.QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", name, attr)
		if attr.PhysPortCnt != 1 || attr.MaxCQE <= 0 || attr.MaxQPWR <= 0 || attr.MaxSGE <= 0 || attr.MaxMRSize == 0 {
			t.Errorf("%s: implausible device attributes %+v", name, attr)
		}
		if attr.NodeGUID != ctx.Device().NodeGUID {
			t.Errorf("%s: node GUID %#x from the kernel, %#x from sysfs", name, attr.NodeGUID, ctx.Device().NodeGUID)
		}
		port, err := ctx.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s port 1: %+v", name, port)
		if port.State != uverbs.PortActive || port.ActiveMTU != uverbs.MTU1024 || port.LinkLayer != uverbs.LinkLayerEthernet {
			t.Errorf("%s port 1: state %v, active MTU %v, link layer %v; want ACTIVE, 1024 (1500-byte veth), Ethernet",
				name, port.State, port.ActiveMTU, port.LinkLayer)
		}
		if port.GIDTableLen < 2 || !port.GRHRequired {
			t.Errorf("%s port 1: GID table of %d, GRH required %v", name, port.GIDTableLen, port.GRHRequired)
		}
		if _, err := ctx.QueryPort(2); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: QueryPort(2) = %v, want EINVAL", name, err)
		}
	}
}

func TestUverbsGIDTable(t *testing.T) {
	for i, name := range devices(t, 2) {
		netdev, want := uvExpect(i)
		link, err := netlink.LinkByName(netdev)
		if err != nil {
			t.Fatal(err)
		}
		ctx := uvOpen(t, name)
		gids, err := ctx.QueryGIDTable()
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		idx := gidIndex(t, name)
		for _, g := range gids {
			t.Logf("%s: GID[%d] %v %v ifindex %d", name, g.Index, g.GID, g.Type, g.NetdevIndex)
			if g.GID.IsZero() {
				t.Errorf("%s: zero GID returned at index %d", name, g.Index)
			}
			if g.Index == idx {
				found = true
				if g.GID != want || g.Type != uverbs.GIDTypeRoCEv2 || g.NetdevIndex != link.Attrs().Index || g.Port != 1 {
					t.Errorf("%s: GID[%d] = %+v; want %v RoCE v2 on %s (ifindex %d)", name, idx, g, want, netdev, link.Attrs().Index)
				}
				if ip := g.GID.To4(); ip == nil || ip.String() != fmt.Sprintf("10.99.0.%d", i+1) {
					t.Errorf("%s: GID[%d].To4() = %v", name, idx, ip)
				}
			}
		}
		if !found {
			t.Errorf("%s: no GID at index %d", name, idx)
		}
		one, err := ctx.QueryGID(1, idx)
		if err != nil || one.GID != want || one.NetdevIndex != link.Attrs().Index {
			t.Errorf("%s: QueryGID(1, %d) = %+v, %v", name, idx, one, err)
		}
		port, err := ctx.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		last := port.GIDTableLen - 1
		if _, err := ctx.QueryGID(1, last); !errors.Is(err, uverbs.ErrGIDUnused) {
			t.Errorf("%s: QueryGID(1, %d) on an empty slot = %v, want ErrGIDUnused", name, last, err)
		}
	}
}

// Every object can be created and destroyed, and when creation fails
// halfway nothing stays behind: fds and ring mappings come back to where
// they were.
func TestUverbsResources(t *testing.T) {
	name := devices(t, 1)[0]
	uvOpen(t, name).Close() // warm up what the runtime opens once (netlink, epoll)
	before := uvCount(t)

	ctx := uvOpen(t, name)
	attr, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := uverbs.NewBuffer(1<<16, uverbs.BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	if mr.LKey() == 0 || mr.RKey() == 0 || mr.Addr() != buf.Addr() || mr.Len() != buf.Len() {
		t.Errorf("MR lkey %#x rkey %#x at %#x+%d", mr.LKey(), mr.RKey(), mr.Addr(), mr.Len())
	}

	// Bad access: refused before the kernel with the reason, or by it.
	if _, err := pd.RegisterMR(buf, uverbs.AccessRemoteWrite); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "LocalWrite") {
		t.Errorf("MR with remote write only = %v, want EINVAL naming LocalWrite", err)
	}
	_, err = pd.RegisterMR(buf, uverbs.AccessLocalWrite|uverbs.AccessOnDemand)
	var verr *uverbs.Error
	// 6.1 answers EINVAL for on-demand paging on a device without it;
	// ib_check_mr_access says EOPNOTSUPP on other kernels.
	if !errors.As(err, &verr) || verr.Verb != "reg_mr" || !(verr.Errno == unix.EINVAL || verr.Errno == unix.EOPNOTSUPP) {
		t.Errorf("on-demand MR on rxe = %v, want reg_mr EINVAL or EOPNOTSUPP", err)
	}

	ch, err := cq.NewChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, 64, ch)
	if err != nil {
		t.Fatal(err)
	}
	if c.CQE() < 64 {
		t.Errorf("CQ granted %d entries, asked 64", c.CQE())
	}
	mid := uvCount(t)
	if _, err := cq.New(ctx, attr.MaxCQE+1, ch); !errors.Is(err, unix.EINVAL) {
		t.Errorf("CQ with cqe %d > max_cqe = %v, want EINVAL", attr.MaxCQE+1, err)
	}
	q, err := rxe.CreateQP(pd, uverbs.QPSpec{
		Type: uverbs.QPTypeRC, SendCQ: c.Verbs(), RecvCQ: c.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: 1 << 30, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err == nil {
		q.Close()
		t.Error("QP with 2^30 send WRs was created")
	}
	uvSame(t, "failed CQ and QP creation", mid)

	q, err = rxe.CreateQP(pd, uverbs.QPSpec{
		Type: uverbs.QPTypeRC, SendCQ: c.Verbs(), RecvCQ: c.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("PD close under a live QP and MR = %v, want EBUSY", err)
	}
	if err := c.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("CQ close under a live QP = %v, want EBUSY", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := buf.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("buffer close under a live MR = %v, want EBUSY", err)
	}
	steps := []struct {
		what string
		f    func() error
	}{{"MR", mr.Close}, {"CQ", c.Close}, {"channel", ch.Close}, {"PD", pd.Close}, {"buffer", buf.Close}}
	for _, s := range steps {
		if err := s.f(); err != nil {
			t.Errorf("close %s: %v", s.what, err)
		}
		if err := s.f(); err != nil {
			t.Errorf("second close %s: %v", s.what, err)
		}
	}
	if uvMapped(t, buf.Addr()) {
		t.Errorf("buffer at %#x still mapped after Close", buf.Addr())
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	uvSame(t, "create and destroy everything", before)
}

// Closing the context releases what the kernel holds; closing the Go
// objects afterwards only releases what is on this side (ring mappings,
// buffer registrations).
func TestUverbsContextCloseFirst(t *testing.T) {
	name := devices(t, 1)[0]
	uvOpen(t, name).Close()
	before := uvCount(t)
	ctx := uvOpen(t, name)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := uverbs.NewBuffer(4096, uverbs.BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() error{c.Close, mr.Close, pd.Close, buf.Close} {
		if err := f(); err != nil {
			t.Errorf("close after the context: %v", err)
		}
	}
	uvSame(t, "context closed first", before)
}

// uvConnectSelf walks an RC QP to RTS connected to itself (rxe loopback),
// through uverbs' MODIFY_QP with a RoCE v2 address vector, and checks what
// QUERY_QP reads back.
func uvConnectSelf(t testing.TB, q *uverbs.QP, gid uverbs.GID) {
	t.Helper()
	idx := uint8(gidIndex(t, devices(t, 1)[0]))
	steps := []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, DestQPNum: q.Num(), RQPSN: 100,
			MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: idx, HopLimit: 64}}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
				uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: 100, Timeout: 14, RetryCnt: 3, RNRRetry: 3, MaxRdAtomic: 1},
			uverbs.QPAttrState | uverbs.QPAttrSQPSN | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
				uverbs.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("modify QP to %v: %v", s.attr.State, err)
		}
		got, _, err := q.Query(uverbs.QPAttrState)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != s.attr.State {
			t.Fatalf("QP in %v after modify to %v", got.State, s.attr.State)
		}
	}
	got, init, err := q.Query(uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrCap)
	if err != nil {
		t.Fatal(err)
	}
	if got.PathMTU != uverbs.MTU1024 || got.DestQPNum != q.Num() || !got.AH.IsGlobal || got.AH.GRH.DGID != gid ||
		got.AH.GRH.SGIDIndex != idx || got.RQPSN != 100 || got.SQPSN != 100 {
		t.Errorf("queried QP attributes %+v", got)
	}
	if init.Cap.MaxSendWR < 16 || init.Type != uverbs.QPTypeRC {
		t.Errorf("queried init attributes %+v", init)
	}
}

func uvPoll(t *testing.T, c *cq.CQ, want int) []cq.WC {
	t.Helper()
	var got []cq.WC
	wc := make([]cq.WC, 8)
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := c.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, wc[:n]...)
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if len(got) != want {
		t.Fatalf("%d completions within 10s, want %d: %+v", len(got), want, got)
	}
	return got
}

// A completion event end to end: arm, loopback SEND, block in GetEvent,
// acknowledge; Close refuses while an event is unacknowledged.
func TestUverbsCompletionEvents(t *testing.T) {
	name := devices(t, 1)[0]
	_, gid := uvExpect(0)
	ctx := uvOpen(t, name)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	buf, err := uverbs.NewBuffer(8192, uverbs.BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	ch, err := cq.NewChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	c, err := cq.New(ctx, 64, ch)
	if err != nil {
		t.Fatal(err)
	}
	q, err := rxe.CreateQP(pd, uverbs.QPSpec{
		Type: uverbs.QPTypeRC, SendCQ: c.Verbs(), RecvCQ: c.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	uvConnectSelf(t, q.Verbs(), gid)

	copy(buf.Bytes(), "ping")
	send := func(id uint64) {
		t.Helper()
		recv := []rxe.RecvWR{{ID: id + 1000, SGEs: []rxe.SGE{{Addr: buf.Addr() + 4096, Length: 4096, LKey: mr.LKey()}}}}
		if err := q.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
		wr := []rxe.SendWR{{ID: id, Opcode: rxe.OpSend, Flags: rxe.Signaled, SGEs: []rxe.SGE{{Addr: buf.Addr(), Length: 4, LKey: mr.LKey()}}}}
		if err := q.PostSend(wr); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := ch.TryGetEvent(); !errors.Is(err, cq.ErrNoEvent) {
		t.Fatalf("TryGetEvent before any completion = %v", err)
	}
	if err := c.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	send(1)
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := ch.GetEvent(wait)
	if err != nil || ev != c {
		t.Fatalf("GetEvent = %p, %v; want the CQ %p", ev, err, c)
	}
	for _, wc := range uvPoll(t, c, 2) {
		if wc.Status != cq.Success {
			t.Errorf("completion %+v", wc)
		}
		if wc.Opcode.IsRecv() && (wc.ByteLen != 4 || string(buf.Bytes()[4096:4100]) != "ping") {
			t.Errorf("receive completion %+v, data %q", wc, buf.Bytes()[4096:4100])
		}
	}

	// Nothing armed: a completion raises no event.
	send(2)
	uvPoll(t, c, 2)
	if ev, err := ch.TryGetEvent(); !errors.Is(err, cq.ErrNoEvent) {
		t.Errorf("event %p, %v without arming", ev, err)
	}

	// The hot paths against the real kernel: no allocation.
	wcs := make([]cq.WC, 4)
	for name, f := range map[string]func(){
		"ReqNotify":        func() { c.ReqNotify(true) },
		"Poll (empty)":     func() { c.Poll(wcs) },
		"PostSendDoorbell": func() { q.Verbs().PostSendDoorbell() },
		"TryGetEvent":      func() { ch.TryGetEvent() },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s allocates %.1f times per call", name, n)
		}
	}

	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); !errors.Is(err, cq.ErrUnackedEvents) || !strings.Contains(err.Error(), "1 events") {
		t.Fatalf("Close with an unacknowledged event = %v", err)
	}
	ev.Ack(1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// A blocked GetEvent returns when its context is cancelled.
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	if _, err := ch.GetEvent(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetEvent with nothing to wait for = %v, want DeadlineExceeded", err)
	}
}

// uvWriteCall matches a 32-byte write() in `strace -xx` output.
var uvWriteCall = regexp.MustCompile(`write\(\d+, "((?:\\x[0-9a-f]{2})+)", 32\) = 32`)

// postSendDoorbells returns the POST_SEND commands (IB_USER_VERBS_CMD_POST_SEND
// = 28, with no work requests: the doorbells) among the 32-byte write()s of
// an `strace -xx` output, their response pointer (checked to be set) and
// qp_handle zeroed, as the only bytes that differ between runs.
func postSendDoorbells(t *testing.T, who, out string) [][]byte {
	t.Helper()
	var doorbells [][]byte
	for _, m := range uvWriteCall.FindAllStringSubmatch(out, -1) {
		b, err := hex.DecodeString(strings.ReplaceAll(m[1], `\x`, ""))
		if err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint32(b) != 28 {
			continue
		}
		if binary.LittleEndian.Uint64(b[8:]) == 0 {
			t.Errorf("%s: doorbell without a response pointer: %x", who, b)
		}
		clear(b[8:16])  // response pointer
		clear(b[16:20]) // qp_handle
		doorbells = append(doorbells, b)
	}
	if len(doorbells) == 0 {
		t.Fatalf("%s: no POST_SEND doorbell in the strace:\n%s", who, out)
	}
	return doorbells
}

// pureverbs' send doorbell is librxe's, byte for byte: both captured by
// strace in this VM, librxe's from ibv_rc_pingpong, pureverbs' from this
// test binary running BenchmarkUverbsPostSendDoorbell (a QP in RTS ringing
// uverbs.QP.PostSendDoorbell).
func TestUverbsDoorbellMatchesLibrxe(t *testing.T) {
	devs := devices(t, 2)
	args := []string{"-n", "5", "-p", "18700"}
	srv := startPeer(t, 60*time.Second, "strace", append([]string{"-f", "-e", "trace=write", "-xx", "-s", "512",
		"ibv_rc_pingpong", "-d", devs[0], "-g", gidArg(t, devs[0])}, args...)...)
	waitListening(t, srv, 18700, 30*time.Second) // strace starts slowly in the VM
	runPeer(t, 60*time.Second, "ibv_rc_pingpong", append(append([]string{"-d", devs[1], "-g", gidArg(t, devs[1])}, args...), "10.99.0.1")...)
	c := postSendDoorbells(t, "librxe", srv.wait(t))

	goOut := runPeer(t, 60*time.Second, "strace", "-f", "-e", "trace=write", "-xx", "-s", "512",
		os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkUverbsPostSendDoorbell$", "-test.benchtime=3x", "-test.count=1")
	if !strings.Contains(goOut, "PASS") {
		t.Fatalf("BenchmarkUverbsPostSendDoorbell under strace did not pass:\n%s", goOut)
	}
	g := postSendDoorbells(t, "pureverbs", goOut)
	for _, b := range c {
		if !bytes.Equal(b, c[0]) {
			t.Errorf("librxe rang two different doorbells: %x and %x", c[0], b)
		}
	}
	for _, b := range g {
		if !bytes.Equal(b, c[0]) {
			t.Errorf("pureverbs doorbell %x, librxe's %x", b, c[0])
		}
	}
	t.Logf("%d librxe and %d pureverbs doorbells, all %x (response pointer and qp_handle zeroed)", len(c), len(g), c[0])
}

// The cost of the two kernel round trips of the data path, in this VM.
func BenchmarkUverbsReqNotify(b *testing.B) {
	ctx := uvOpen(b, devices(b, 1)[0])
	c, err := cq.New(ctx, 16, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.ReqNotify(false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUverbsPostSendDoorbell(b *testing.B) {
	ctx := uvOpen(b, devices(b, 1)[0])
	pd, err := ctx.AllocPD()
	if err != nil {
		b.Fatal(err)
	}
	defer pd.Close()
	c, err := cq.New(ctx, 16, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	q, err := rxe.CreateQP(pd, uverbs.QPSpec{Type: uverbs.QPTypeRC, SendCQ: c.Verbs(), RecvCQ: c.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	_, gid := uvExpect(0)
	uvConnectSelf(b, q.Verbs(), gid) // rxe rings doorbells of RTS QPs only
	b.ReportAllocs()
	for b.Loop() {
		if err := q.Verbs().PostSendDoorbell(); err != nil {
			b.Fatal(err)
		}
	}
}

// A Context dropped without Close (with a PD in it) still gives its fds
// back once the garbage collector finds it; an explicit Close stops that
// cleanup, so it never closes a reused fd number later.
func TestUverbsContextCleanupOnGC(t *testing.T) {
	d, err := uverbs.DeviceByName(devices(t, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	before := uvCount(t)
	func() {
		ctx, err := uverbs.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ctx.AllocPD(); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for uvCount(t).fds != before.fds && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	uvSame(t, "after dropping a context", before)
	claimLeaks(t, "uverbs.Context command fd", "uverbs.Context async event fd", "uverbs.PD")

	ctx, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	// The freed fd number is taken by a file of ours; a late cleanup of the
	// closed context would close it.
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.Stat(); err != nil {
		t.Fatalf("a file opened after Close was closed behind our back: %v", err)
	}
}
