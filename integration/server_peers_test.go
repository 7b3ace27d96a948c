//go:build integration

package integration

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/server/framecheck"
)

// TestServerMalformed sends what the server must refuse, each from a peer
// that really sends it, and checks the server keeps serving.
func TestServerMalformed(t *testing.T) {
	t.Run("PlainSend", func(t *testing.T) {
		r := newRXServer(t)
		r.send(time.Minute, "-op", "send", "-n", "5", "-s", "100")
		st := r.waitStats(10*time.Second, "5 bad opcodes", func(s *server.Stats) bool { return s.BadOpcode == 5 })
		if st.Frames != 0 || st.Posted+st.Held != r.srv.Depth() {
			t.Errorf("frames %d posted %d held %d", st.Frames, st.Posted, st.Held)
		}
	})
	t.Run("ZeroLength", func(t *testing.T) {
		r := newRXServer(t)
		r.send(time.Minute, "-n", "5", "-s", "0")
		st := r.waitStats(10*time.Second, "5 bad lengths", func(s *server.Stats) bool { return s.BadLength == 5 })
		if st.Frames != 0 {
			t.Errorf("%d frames delivered", st.Frames)
		}
	})
	t.Run("LongerThanSlot", func(t *testing.T) {
		r := newRXServer(t, withConfig(func(c *server.Config) { c.MaxPayload = 1024 }))
		p := startPeer(t, time.Minute, "rocev2-send", r.sendArgs("-n", "1", "-s", "2000")...)
		<-p.done
		if p.err == nil {
			t.Errorf("the sender of an oversized SEND succeeded:\n%s", p.out.String())
		}
		// 6.1's rxe completes the receive with LOC_QP_OP_ERR (newer
		// kernels: LOC_LEN_ERR) and moves the QP to ERROR.
		st := r.waitStats(10*time.Second, "the connection to end", func(s *server.Stats) bool {
			return s.ErrorCount(cq.LocLenErr)+s.ErrorCount(cq.LocQPOpErr) == 1 && s.SessionEnds == 1
		})
		t.Logf("sender: %s; server errors %v", strings.TrimSpace(p.out.String()), st.Errors)
		r.send(time.Minute, "-n", "10", "-s", "1024")
		r.waitFrames(10, 10*time.Second)
	})
	t.Run("RDMAWrite", func(t *testing.T) {
		// A frame held in slot 0, then an RDMA WRITE aimed at slot 0: the
		// write is refused and the held bytes are what the SEND put there.
		r := newRXServer(t)
		r.hold.Store(true)
		r.send(time.Minute, "-n", "1", "-s", "64")
		r.waitFrames(1, 10*time.Second)
		r.mu.Lock()
		held := r.held[0]
		r.mu.Unlock()
		before := append([]byte(nil), held.Data()...)
		args := []string{"-op", "write", "-n", "1", "-s", "64", "-C", "16",
			"-raddr", strconv.FormatUint(r.srv.MRAddr(), 10), "-rkey", strconv.FormatUint(uint64(r.srv.RKey()), 10)}
		p := startPeer(t, time.Minute, "rocev2-send", r.sendArgs(args...)...)
		<-p.done
		out := p.out.String()
		// rxe checks the QP's access flags (none granted) before the MR's
		// and answers NAK "invalid request"; with a QP granting remote
		// write the MR (local write only) would answer "remote access".
		if p.err == nil || !(strings.Contains(out, "REM_ACCESS_ERR") || strings.Contains(out, "REM_INV_REQ_ERR")) {
			t.Fatalf("RDMA WRITE into the slab: %v\n%s", p.err, out)
		}
		st := r.srv.Stats()
		t.Logf("sender: %s; server frames %d errors %v sessions %d/%d", strings.TrimSpace(out), st.Frames, st.Errors, st.Sessions, st.SessionEnds)
		if st.Frames != 1 {
			t.Errorf("%d frames, want only the SEND's", st.Frames)
		}
		if got := held.Data(); !bytes.Equal(got, before) || held.Len() != 64 {
			t.Errorf("slot 0 changed under the refused write")
		}
		var c framecheck.Checker
		c.Check(held.Data())
		if c.Corrupt != 0 || c.Lost != 0 {
			t.Errorf("held frame fails its checksum: %+v", c)
		}
		r.hold.Store(false)
		r.releaseHeld(-1)
		r.send(time.Minute, "-n", "10", "-s", "64", "-C", "32")
		r.waitFrames(11, 10*time.Second)
		if c := r.checker(2); c.Corrupt != 0 || c.Lost != 0 || c.Frames != 10 {
			t.Errorf("after the write: %+v", c)
		}
	})
}

// TestServerSideChannelGarbage feeds the side channel garbage, a truncated
// record and silence; each is refused and logged, and then a real sender
// streams.
func TestServerSideChannelGarbage(t *testing.T) {
	r := newRXServer(t)
	addr := "127.0.0.1:" + strconv.Itoa(r.port)
	send := func(b []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(b)
		if len(b) < qp.PeerRecordLen {
			c.(*net.TCPConn).CloseWrite()
		}
		var buf [64]byte
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(buf[:]); err == nil {
			t.Errorf("the server answered %q to %q", buf[:n], b)
		}
	}
	send([]byte(strings.Repeat("garbage!", 7)[:qp.PeerRecordLen]))
	send([]byte("0000:000011:00"))
	send([]byte("0000:0000zz:000001:00000000000000000000ffff0a630002\x00"))
	c, err := net.Dial("tcp", addr) // silent: the server's timeout ends it
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(2500 * time.Millisecond)
	r.send(time.Minute, "-n", "100", "-s", "500")
	r.waitFrames(100, 10*time.Second)
	log := r.log()
	for _, want := range []string{"malformed peer record", "got 14 of 52 bytes", "timeout"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if st := r.srv.Stats(); st.Sessions != 1 {
		t.Errorf("%d connections made, want 1 (garbage must not connect)", st.Sessions)
	}
}

// TestServerConfigChecks: New names the unused GID slot and refuses a path
// MTU above the port's.
func TestServerConfigChecks(t *testing.T) {
	devs := devices(t, 1)
	fds, maps := openFDs(t), uverbsMappings(t)
	defer func() {
		if n, m := openFDs(t), uverbsMappings(t); n != fds || m != maps {
			t.Errorf("after the failed News and a Close: %d fds and %d uverbs mappings, %d and %d before", n, m, fds, maps)
		}
	}()
	cfg := server.DefaultConfig(devs[0])
	cfg.GIDIndex = 77
	_, err := server.New(cfg)
	if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "GID index 77 on "+devs[0]) {
		t.Errorf("unused GID slot: %v", err)
	}
	cfg = server.DefaultConfig(devs[0])
	cfg.PathMTU = 5
	if _, err := server.New(cfg); !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "active MTU") {
		t.Errorf("PMTU 4096 on a 1500-byte veth: %v", err)
	}
	cfg = server.DefaultConfig(devs[0])
	cfg.GIDIndex = gidIndex(t, devs[0])
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.SetPeerGID(make([]byte, 15)); err == nil {
		t.Error("a 15-byte peer GID was accepted")
	}
	if err := srv.CompleteConnection(0x11, 1, 6, 12); err == nil {
		t.Error("PMTU 6 accepted")
	}
	if err := srv.CompleteConnection(0x11, 1, 3, 0); err == nil {
		t.Error("min RNR timer 0 accepted")
	}
	if got := srv.GIDString(); got != "0000:0000:0000:0000:0000:ffff:0a63:0001" {
		t.Errorf("GIDString %q", got)
	}
}

// TestServerTools runs rocev2-server as a program with -o and --hold (a
// slow consumer) against rocev2-send: the summary says 0 lost, 0 corrupt
// and the file holds every payload back to back. The server finds its GID
// without -g (its netdev's), the sender is given its GID by address.
func TestServerTools(t *testing.T) {
	devs := devices(t, 2)
	const port, n, size = 18690, 300, 700
	file := t.TempDir() + "/frames.bin"
	srv := startPeer(t, 2*time.Minute, "rocev2-server", "-d", devs[0], "-p", strconv.Itoa(port), "-n", strconv.Itoa(n),
		"-r", "16", "-o", file, "--hold", "2ms", "-timeout", "90s", "-check")
	waitListening(t, srv, port, 30*time.Second)
	runPeer(t, time.Minute, "rocev2-send", "-d", devs[1], "-g", "10.99.0.2", "-p", strconv.Itoa(port), "-n", strconv.Itoa(n), "-s", strconv.Itoa(size), "-c", "3", "10.99.0.1")
	out := srv.wait(t)
	for _, want := range []string{"frames 300, bytes 210000", "channels 0:100 1:100 2:100\n", "ring (shared, unknown size): 0 gaps (0 positions missing)", "0 duplicates", "0 lost, 0 corrupt"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c framecheck.Checker
	for off := 0; off+size <= len(b); off += size {
		c.Check(b[off : off+size])
	}
	c.Expect(n)
	if len(b) != n*size || c.Lost != 0 || c.Corrupt != 0 {
		t.Errorf("file: %d bytes, %+v", len(b), c)
	}
}
