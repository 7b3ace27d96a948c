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
	Options         // the server to connect to, the TCP port, -s -n -r -e
	Validate bool   // -c: stamp and check the message
	LocalSep string // what precedes "GID" in the local address line (see PrintAddressSep)

	End *Objects

	// LocalDest is this end's address with send PSN psn.
	LocalDest func(psn uint32) (Dest, error)
	// Connect moves the QP to RTS towards remote, sending from psn.
	Connect func(remote Dest, psn uint32) error
	// Around, if set, is called just before the loop with its bookkeeping,
	// and what it returns right after the loop (rc-pingpong counts the
	// loop's allocations so).
	Around func(p *Pingpong) (after func())
}

// RunSession is a tool's work once its options are parsed, for Main: open
// makes the end and the session over it, Run runs that, and the end is
// closed, its error joined to the run's.
func RunSession[O any](open func(o *O) (*Session, error)) func(o *O, stdout io.Writer) error {
	return func(o *O, stdout io.Writer) (err error) {
		s, err := open(o)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, s.End.Close()) }()
		return Run(s, stdout)
	}
}

// Run is the C tools' pingpong after the verbs objects are made: post the
// receives, arm the CQ (events mode), print the local address, trade
// addresses over TCP (the server connects its QP before it answers, the
// client after), print the remote address, run the loop and print the
// summary; -c stamps the client's message and checks the server's.
func Run(s *Session, stdout io.Writer) error {
	p := &Pingpong{Q: s.End, Iters: s.Iters, RxDepth: s.RxDepth}
	if err := p.Fill(); err != nil {
		return err
	}
	if s.Events {
		if err := s.End.CQ.ReqNotify(false); err != nil {
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
			MarkPages(s.End.Msg())
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
	events, err := Loop(s.End.CQ, s.End.Ch, p, wc)
	elapsed := time.Since(start)
	after()
	s.End.CQ.Ack(events)
	if err != nil {
		return err
	}
	PrintSummary(stdout, s.Size, s.Iters, elapsed)
	if !client && s.Validate {
		CheckPages(stdout, s.End.Msg())
	}
	return nil
}
