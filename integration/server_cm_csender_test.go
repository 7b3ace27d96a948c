//go:build integration

package integration

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/server"
)

// received is one frame as the server's Handler saw it.
type received struct {
	channel  uint8
	position uint32
	data     []byte
}

// TestServerCMCSender: a sender nobody here wrote against the Go API —
// cm-imm-send (integration/testdata/cpeer, C against librdmacm and
// libibverbs only; rxevm compiles it) — resolves the server's address from
// rxe1's 10.99.0.2 (rdma_resolve_addr, rdma_resolve_route), connects with
// rdma_connect (librdmacm's plain parameters, no private data) and sends
// 2 000 SEND_WITH_IMM frames of 1..9000 random bytes on channels 5..7. The
// server receives every payload the C sender recorded having sent,
// byte-identical and in order, each with the channel and ring position of
// its immediate; the sender's disconnect ends the connection.
func TestServerCMCSender(t *testing.T) {
	const total = 2000
	var (
		mu  sync.Mutex
		got []received
	)
	r := newRXServer(t, withConfig(func(c *server.Config) {
		c.Handler = func(f server.Frame) {
			mu.Lock()
			got = append(got, received{f.Channel(), f.Position(), bytes.Clone(f.Data())})
			mu.Unlock()
			f.Release()
		}
	}))
	r.serveCM(server.CMOptions{})
	sent := filepath.Join(t.TempDir(), "sent")
	out := runPeer(t, 3*time.Minute, "cm-imm-send", "-b", "10.99.0.2", "-p", strconv.Itoa(r.port),
		"-n", strconv.Itoa(total), "-s", "1-9000", "-c", "3", "-C", "5", "-q", "32", "-r", "20261204", "-o", sent, "10.99.0.1")
	if !strings.Contains(out, "sent 2000 frames") {
		t.Fatalf("cm-imm-send:\n%s", out)
	}
	st := r.waitStats(30*time.Second, "the C sender's disconnect", func(s *server.Stats) bool { return s.SessionEnds == 1 })
	want := readSentFrames(t, sent)
	mu.Lock()
	defer mu.Unlock()
	if len(want) != total || len(got) != total || st.Frames != total {
		t.Fatalf("the C sender recorded %d frames, the Handler saw %d, Stats.Frames %d; want %d", len(want), len(got), st.Frames, total)
	}
	bad := 0
	for i, g := range got {
		if !bytes.Equal(g.data, want[i]) || g.channel != uint8(5+i%3) || g.position != uint32(i) {
			if bad++; bad <= 5 {
				t.Errorf("frame %d: channel %d position %d, %d bytes (want channel %d position %d, %d bytes; payload equal: %v)",
					i, g.channel, g.position, len(g.data), 5+i%3, i, len(want[i]), bytes.Equal(g.data, want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d frames differ", bad, total)
	}
	if st.CMConnects != 1 || st.CMFailures != 0 || st.Ring.Gaps != 0 || st.BadOpcode+st.BadLength+st.BadWRID != 0 {
		t.Errorf("CM connects %d failures %d, ring gaps %d, bad opcode %d length %d wrid %d",
			st.CMConnects, st.CMFailures, st.Ring.Gaps, st.BadOpcode, st.BadLength, st.BadWRID)
	}
	t.Logf("cm-imm-send: %s\nserver log:\n%s", strings.TrimSpace(out), r.log())
}

// readSentFrames reads cm-imm-send's -o file: each payload as a
// little-endian uint32 length and its bytes.
func readSentFrames(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("%s: %d bytes left after %d frames, no length", path, len(b), len(frames))
		}
		n := int(binary.LittleEndian.Uint32(b))
		if len(b) < 4+n {
			t.Fatalf("%s: frame %d of %d bytes, %d left", path, len(frames), n, len(b)-4)
		}
		frames = append(frames, b[4:4+n])
		b = b[4+n:]
	}
	return frames
}
