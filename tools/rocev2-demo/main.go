// Command rocev2-demo is what `make demo` runs inside the VM: it starts
// rocev2-server on rxe0 (10.99.0.1), waits until it listens, streams from
// rocev2-send on rxe1 across the veth pair for a few seconds, and prints
// the receive rate and the server's "N lost, M corrupt". It exits non-zero
// unless every frame arrived intact.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/integration/vm"
)

func main() {
	dur := flag.Duration("t", 3*time.Second, "how long the sender streams")
	size := flag.String("s", "64-9000", "payload size or MIN-MAX range (rocev2-send -s)")
	channels := flag.Int("c", 4, "channels")
	serverDev := flag.String("server-dev", "rxe0", "server's device")
	senderDev := flag.String("sender-dev", "rxe1", "sender's device")
	addr := flag.String("addr", "10.99.0.1", "server's address")
	port := flag.Int("p", 18515, "side-channel port")
	flag.Parse()
	if err := run(*dur, *size, *channels, *serverDev, *senderDev, *addr, *port); err != nil {
		fmt.Fprintln(os.Stderr, "rocev2-demo:", err)
		os.Exit(1)
	}
}

// tool is the path of a sibling program (the VM puts them all in
// /usr/local/bin).
func tool(name string) string {
	self, err := os.Executable()
	if err != nil {
		return name
	}
	return filepath.Join(filepath.Dir(self), name)
}

func run(dur time.Duration, size string, channels int, serverDev, senderDev, addr string, port int) error {
	limit := dur + 60*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var srvOut bytes.Buffer
	srv := exec.CommandContext(ctx, tool("rocev2-server"), "-d", serverDev, "-p", strconv.Itoa(port), "-once", "-q",
		"-timeout", limit.String())
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return err
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	for {
		ok, err := vm.Listening(port)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		select {
		case err := <-srvDone:
			return fmt.Errorf("rocev2-server exited before listening: %v\n%s", err, srvOut.String())
		case <-ctx.Done():
			return fmt.Errorf("rocev2-server does not listen:\n%s", srvOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Printf("rocev2-demo: rocev2-server on %s (%s:%d), rocev2-send on %s: %v of %s-byte frames on %d channels\n",
		serverDev, addr, port, senderDev, dur, size, channels)
	snd := exec.CommandContext(ctx, tool("rocev2-send"), "-d", senderDev, "-p", strconv.Itoa(port), "-t", dur.String(),
		"-n", "0", "-s", size, "-c", strconv.Itoa(channels), addr)
	sndOut, sndErr := snd.CombinedOutput()
	fmt.Print(indent("rocev2-send", string(sndOut)))
	if sndErr != nil {
		srv.Process.Signal(os.Interrupt)
		<-srvDone
		fmt.Print(indent("rocev2-server", srvOut.String()))
		return fmt.Errorf("rocev2-send: %v", sndErr)
	}
	srvErr := <-srvDone
	out := srvOut.String()
	fmt.Print(indent("rocev2-server", out))
	if srvErr != nil {
		return fmt.Errorf("rocev2-server: %v", srvErr)
	}
	var rate, verdict string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "frames ") {
			rate = l
		}
		if strings.HasSuffix(l, " corrupt") {
			verdict = l
		}
	}
	if rate == "" || verdict == "" {
		return fmt.Errorf("no summary from rocev2-server")
	}
	fmt.Printf("rocev2-demo: received %s\nrocev2-demo: %s\n", rate, verdict)
	if !strings.HasPrefix(verdict, "0 lost, 0 corrupt") {
		return fmt.Errorf("frames were lost or corrupted")
	}
	return nil
}

func indent(name, s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l != "" {
			fmt.Fprintf(&b, "  %s| %s\n", name, l)
		}
	}
	return b.String()
}
