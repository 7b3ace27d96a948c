package pingpong

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/tools/internal/errwriter"
)

// Main is the C tools' main(): it parses args (after the program name)
// with parse; a usage error prints the usage text, any other parse error
// the program name, the message and the usage text. Then run does the
// work, printing its report on the stdout it is given, and its error is
// printed on stderr. A report that could not be written in full (the
// first failed write ends it) fails the run too. It returns the exit
// status.
func Main[O any](args []string, stdout, stderr io.Writer,
	parse func([]string) (O, error), usage func(w io.Writer, argv0 string), run func(o *O, stdout io.Writer) error) int {
	o, err := parse(args[1:])
	switch {
	case errors.Is(err, ErrUsage):
		usage(stdout, args[0])
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
		usage(stdout, args[0])
		return 1
	}
	out := errwriter.New(stdout)
	err = run(&o, out)
	if werr := out.Err(); werr != nil {
		err = errors.Join(err, fmt.Errorf("%s: writing the report: %w", args[0], werr))
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// Session is one end of a one-QP ping-pong (rc, uc and ud), as Run drives
// it: the tool's options and its verbs objects.
type Session struct {
	Server   string // host to connect to; empty: be the server
	Port     int    // TCP port of the address exchange
	Size     int    // message size, for the summary
	Iters    int
	RxDepth  int
	Events   bool   // sleep on completion events instead of polling
	Validate bool   // -c: stamp and check Msg
	LocalSep string // what precedes "GID" in the local address line (see PrintAddressSep)

	Q   Poster
	CQ  *cq.CQ
	Ch  *cq.Channel // nil when polling
	Msg []byte      // the message in the buffer, as -c stamps and checks it

	// LocalDest is this end's address with send PSN psn.
	LocalDest func(psn uint32) (Dest, error)
	// Connect moves the QP to RTS towards remote, sending from psn.
	Connect func(remote Dest, psn uint32) error
	// Around, if set, is called just before the loop with its bookkeeping,
	// and what it returns right after the loop (rc-pingpong counts the
	// loop's allocations so).
	Around func(p *Pingpong) (after func())
}

// Run is the C tools' pingpong after the verbs objects are made: post the
// receives, arm the CQ (events mode), print the local address, trade
// addresses over TCP (the server connects its QP before it answers, the
// client after), print the remote address, run the loop and print the
// summary; -c stamps the client's message and checks the server's.
func Run(s *Session, stdout io.Writer) error {
	p := &Pingpong{Q: s.Q, Iters: s.Iters, RxDepth: s.RxDepth}
	if err := p.Fill(); err != nil {
		return err
	}
	if s.Events {
		if err := s.CQ.ReqNotify(false); err != nil {
			return fmt.Errorf("Couldn't request CQ notification: %w", err)
		}
	}
	psn := rand.Uint32() & 0xffffff
	local, err := s.LocalDest(psn)
	if err != nil {
		return err
	}
	PrintAddressSep(stdout, "local address: ", s.LocalSep, local)

	client := s.Server != ""
	var remote Dest
	if client {
		remote, err = DialExchange(s.Server, s.Port, local)
	} else {
		ln, lerr := Listen(s.Port)
		if lerr != nil {
			return lerr
		}
		remote, err = AcceptExchange(ln, local, func(r Dest) error { return s.Connect(r, psn) })
	}
	if err != nil {
		return err
	}
	PrintAddress(stdout, "remote address:", remote)
	if client {
		if err := s.Connect(remote, psn); err != nil {
			return err
		}
		if s.Validate {
			MarkPages(s.Msg)
		}
	}
	if err := p.Start(client); err != nil {
		return err
	}
	if !s.Events {
		// The poll loop spins; keep it on one thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	wc := make([]cq.WC, 2) // the C tools poll two at a time
	after := func() {}
	if s.Around != nil {
		after = s.Around(p)
	}
	start := time.Now()
	events, err := Loop(s.CQ, s.Ch, p, wc)
	elapsed := time.Since(start)
	after()
	s.CQ.Ack(events)
	if err != nil {
		return err
	}
	PrintSummary(stdout, s.Size, s.Iters, elapsed)
	if !client && s.Validate {
		CheckPages(stdout, s.Msg)
	}
	return nil
}
