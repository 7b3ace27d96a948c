//go:build integration

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/server/framecheck"
)

// rxServer is a server.Server on rxe0 serving the side channel on a port
// of its own, with a handler that checks every payload (rocev2-send's
// format) per sender (see checkerOf) and either releases or holds it.
type rxServer struct {
	t    *testing.T
	srv  *server.Server
	port int

	mu       sync.Mutex
	checkers [256]framecheck.Checker
	held     []*server.Frame
	hold     atomic.Bool
	bad      atomic.Int64 // invariant violations seen by the handler
	n        atomic.Uint64
	logs     []string
	serveErr chan error
	cancel   context.CancelFunc
	once     sync.Once
	closeErr error
}

var nextPort atomic.Int32

// checkerOf is the checker of a channel: each sender in a test uses its own
// group of 16 channels (rocev2-send -C), and a sender's sequence numbers
// run across all its channels.
func checkerOf(ch uint8) int { return int(ch) / 16 }

func newRXServer(t *testing.T, edit func(*server.Config)) *rxServer {
	return newRXServerServing(t, edit, true)
}

func newRXServerServing(t *testing.T, edit func(*server.Config), serve bool) *rxServer {
	t.Helper()
	devs := devices(t, 2)
	r := &rxServer{t: t, port: 18600 + int(nextPort.Add(1)), serveErr: make(chan error, 1)}
	cfg := server.DefaultConfig(devs[0])
	cfg.GIDIndex = gidIndex(t, devs[0])
	cfg.Handler = r.handle
	if edit != nil {
		edit(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	r.srv = srv
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(r.port))
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if !serve {
		ln.Close()
		r.serveErr <- nil
	} else {
		go func() {
			r.serveErr <- srv.Serve(ctx, ln, server.ServeOptions{WatchPeer: true, Timeout: 2 * time.Second, Logf: r.logf})
		}()
	}
	t.Cleanup(func() { r.close() })
	return r
}

func (r *rxServer) logf(format string, args ...any) {
	r.mu.Lock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *rxServer) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.logs, "\n")
}

func (r *rxServer) handle(f *server.Frame) {
	if r.n.Add(1)%97 == 0 {
		if st := r.srv.Stats(); st.Posted+st.Held != r.srv.Depth() {
			r.bad.Add(1)
		}
	}
	r.mu.Lock()
	r.checkers[checkerOf(f.Channel())].Check(f.Data())
	if r.hold.Load() {
		r.held = append(r.held, f)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	f.Release()
}

// releaseHeld releases up to n held frames (all for n < 0).
func (r *rxServer) releaseHeld(n int) {
	r.mu.Lock()
	if n < 0 || n > len(r.held) {
		n = len(r.held)
	}
	fs := r.held[:n]
	r.held = append([]*server.Frame(nil), r.held[n:]...)
	r.mu.Unlock()
	for _, f := range fs {
		f.Release()
	}
}

func (r *rxServer) close() error {
	r.once.Do(func() {
		r.cancel()
		r.closeErr = r.srv.Close()
		<-r.serveErr
		r.releaseHeld(-1)
	})
	return r.closeErr
}

// waitFrames waits until the server delivered n frames in all.
func (r *rxServer) waitFrames(n uint64, limit time.Duration) {
	r.t.Helper()
	r.waitStats(limit, fmt.Sprintf("%d frames", n), func(st *server.Stats) bool { return st.Frames >= n })
}

func (r *rxServer) waitStats(limit time.Duration, what string, cond func(*server.Stats) bool) server.Stats {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := r.srv.Stats()
		if cond(&st) {
			return st
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("waited %v for %s; stats: frames %d posted %d held %d errors %v bad opcode %d length %d sessions %d/%d\nlog:\n%s",
				limit, what, st.Frames, st.Posted, st.Held, st.Errors, st.BadOpcode, st.BadLength, st.Sessions, st.SessionEnds, r.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checker returns the checker of sender group g (see checkerOf).
func (r *rxServer) checker(g int) framecheck.Checker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkers[g]
}

// send runs rocev2-send on rxe1 against the server with extra arguments.
func (r *rxServer) sendArgs(args ...string) []string {
	devs := devices(r.t, 2)
	return append(append([]string{"-d", devs[1], "-g", gidArg(r.t, devs[1]), "-p", strconv.Itoa(r.port)}, args...), "10.99.0.1")
}

func (r *rxServer) send(limit time.Duration, args ...string) string {
	r.t.Helper()
	return runPeer(r.t, limit, "rocev2-send", r.sendArgs(args...)...)
}

// hwCounter reads one of an rxe port's hardware counters.
func hwCounter(t *testing.T, dev, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readFull(c net.Conn, b []byte) (int, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
