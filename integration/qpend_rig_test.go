//go:build integration

package integration

import (
	"cmp"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// qpEnd is one side of an RC connection: a device context, a PD, a
// registered off-heap buffer, one CQ for sends and receives, and a QP.
type qpEnd struct {
	dev      string
	ctx      *uverbs.Context
	port     uverbs.PortAttr
	gid      uverbs.GID
	gidIndex int
	sgid     uverbs.GIDEntry // gid's entry, what the QP sends from
	pd       *uverbs.PD
	buf      *uverbs.Buffer
	mr       *uverbs.MR
	ch       *cq.Channel // nil unless asked for
	cq       *cq.CQ
	qp       *qp.QP
}

type endOpts struct {
	bufSize int
	cqe     int
	cap     qp.Cap
	channel bool
	typ     qp.Type // 0 means RC
}

// mappedGID finds the port's IPv4-mapped RoCE v2 GID in sysfs, the kernel's
// own account, independent of the code under test.
func mappedGID(t testing.TB, dev string, port uverbs.PortAttr) (uverbs.GID, int) {
	t.Helper()
	dir := "/sys/class/infiniband/" + dev + "/ports/1/"
	for i := 0; i < port.GIDTableLen; i++ {
		typ, err := os.ReadFile(dir + "gid_attrs/types/" + strconv.Itoa(i))
		if err != nil || strings.TrimSpace(string(typ)) != "RoCE v2" {
			continue
		}
		raw, err := os.ReadFile(dir + "gids/" + strconv.Itoa(i))
		if err != nil {
			continue
		}
		ip := net.ParseIP(strings.TrimSpace(string(raw)))
		if ip == nil || ip.To4() == nil {
			continue
		}
		var g uverbs.GID
		copy(g[:], ip.To16())
		return g, i
	}
	t.Fatalf("%s has no IPv4 RoCE v2 GID", dev)
	return uverbs.GID{}, 0
}

// openEnd creates everything one side needs; t.Cleanup releases it in
// reverse order.
func openEnd(t testing.TB, dev string, o endOpts) *qpEnd {
	t.Helper()
	d, err := uverbs.DeviceByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	e := &qpEnd{dev: dev}
	if e.ctx, err = uverbs.Open(d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "context", e.ctx.Close()) })
	if e.port, err = e.ctx.QueryPort(1); err != nil {
		t.Fatal(err)
	}
	e.gid, e.gidIndex = mappedGID(t, dev, e.port)
	e.sgid = uverbs.GIDEntry{GID: e.gid, Index: e.gidIndex, Port: 1, Type: uverbs.GIDTypeRoCEv2}
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "PD", e.pd.Close()) })
	if e.buf, err = uverbs.NewBuffer(max(o.bufSize, 4096), uverbs.BufferOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "buffer", e.buf.Close()) })
	if e.mr, err = e.pd.RegisterMR(e.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "MR", e.mr.Close()) })
	if o.channel {
		if e.ch, err = cq.NewChannel(e.ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeOK(t, "channel", e.ch.Close()) })
	}
	if e.cq, err = cq.New(e.ctx, max(o.cqe, 256), e.ch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "CQ", e.cq.Close()) })
	if e.qp, err = qp.New(e.pd, qp.Spec{Type: cmp.Or(o.typ, qp.RC), SendCQ: e.cq, RecvCQ: e.cq, Cap: o.cap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "QP", e.qp.Close()) })
	return e
}

func closeOK(t testing.TB, what string, err error) {
	if err != nil {
		t.Errorf("close %s: %v", what, err)
	}
}

// connectQPs brings a and b (which may share a device) to RTS, each aimed
// at the other, the way two programs would after exchanging QPN, PSN and
// GID out of band.
func connectQPs(t testing.TB, a, b *qpEnd) {
	t.Helper()
	for _, s := range []struct{ local, remote *qpEnd }{{a, b}, {b, a}} {
		q := s.local.qp
		if err := q.ToInit(qp.InitParams{Access: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead}); err != nil {
			t.Fatal(err)
		}
		if err := q.ToRTR(qp.RTRParams{
			DestQPN: s.remote.qp.Num(),
			RQPSN:   psn(s.remote.qp),
			PathMTU: s.local.port.ActiveMTU,
			DGID:    s.remote.gid,
			SGID:    s.local.sgid,
		}); err != nil {
			t.Fatal(err)
		}
		if err := q.ToRTS(qp.RTSParams{SQPSN: psn(q)}); err != nil {
			t.Fatal(err)
		}
	}
}

func psn(q *qp.QP) uint32 { return q.Num() * 0x9e37 & 0xffffff }

// pair opens two ends, on rxe0 and rxe1 or both on rxe0 (loopback), and
// connects them.
func pair(t testing.TB, loopback bool, o endOpts) (*qpEnd, *qpEnd) {
	t.Helper()
	devs := devices(t, 2)
	if loopback {
		devs[1] = devs[0]
	}
	a, b := openEnd(t, devs[0], o), openEnd(t, devs[1], o)
	connectQPs(t, a, b)
	return a, b
}

// pollWait polls c until n completions arrived or limit passed.
func pollWait(t testing.TB, c *cq.CQ, wc []cq.WC, n int, limit time.Duration) []cq.WC {
	t.Helper()
	deadline := time.Now().Add(limit)
	got := 0
	for got < n {
		k, err := c.Poll(wc[got:n])
		if err != nil {
			t.Fatal(err)
		}
		got += k
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after %v: %+v", got, n, limit, wc[:got])
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return wc[:n]
}

// quiet checks that c stays empty for a moment.
func quiet(t testing.TB, c *cq.CQ, what string) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	wc := make([]cq.WC, 4)
	if n, _ := c.Poll(wc); n != 0 {
		t.Fatalf("%s: unexpected completions %+v", what, wc[:n])
	}
}

func sge(e *qpEnd, off, length int) uverbs.SGE {
	return uverbs.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(length), LKey: e.mr.LKey()}
}

// connectOne connects qa (on end a) with qb (on end b), both ways.
func connectOne(t testing.TB, a *qpEnd, qa *qp.QP, b *qpEnd, qb *qp.QP) {
	t.Helper()
	for _, s := range []struct {
		e      *qpEnd
		q      *qp.QP
		re     *qpEnd
		remote *qp.QP
	}{{a, qa, b, qb}, {b, qb, a, qa}} {
		if err := s.q.Connect(qp.Peer{QPN: s.remote.Num(), PSN: psn(s.remote), GID: s.re.gid}, qp.ConnectOptions{
			SGID: s.e.sgid, PathMTU: s.e.port.ActiveMTU, SendPSN: psn(s.q),
			Access: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead,
		}); err != nil {
			t.Fatal(err)
		}
	}
}
