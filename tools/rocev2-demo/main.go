// Command rocev2-demo is what `make demo` runs inside the VM: it makes a veth
// pair of its own (vdemo0 10.96.0.1, vdemo1 10.96.0.2) and puts an rxe link
// on each end with rxe-link (the minimal host's tool: no iproute2 needed),
// which prints each link's RoCE v2 GID index; it starts rocev2-server on
// rxd0 with that index, waits until it listens, streams from rocev2-send on
// rxd1 across the pair for a few seconds, and prints the receive rate and
// the verdict: the frames rocev2-server counted (with -check) against those
// rocev2-send had acknowledged, none lost, none out of order or duplicated,
// every payload's checksum intact. It exits non-zero unless all of that
// holds. rxe-link deletes the links at the end.
//
//	rocev2-demo [-t 3s] [-s 64-9000] [-c 4] [-p 18515] [-- ROCEV2-SEND-FLAGS...]
//
// Flags after -- go to rocev2-send: a test breaks the stream on purpose
// with its -drop or -corrupt and expects the demo to fail.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
)

func main() {
	dur := flag.Duration("t", 3*time.Second, "how long the sender streams")
	size := flag.String("s", "64-9000", "payload size or MIN-MAX range (rocev2-send -s)")
	channels := flag.Int("c", 4, "channels")
	port := flag.Int("p", 18515, "side-channel port")
	flag.Parse()
	if err := demo(*dur, *size, *channels, *port, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "rocev2-demo:", err)
		os.Exit(1)
	}
}

// The demo's own pair: rxe-link puts serverDev on the first netdev and
// senderDev on the second.
const (
	serverDev, senderDev = "rxd0", "rxd1"
	serverAddr           = "10.96.0.1"
)

var demoPair = topology.Pair{
	Netdevs: [2]string{"vdemo0", "vdemo1"},
	Addrs: [2]net.IPNet{
		{IP: net.IPv4(10, 96, 0, 1), Mask: net.CIDRMask(24, 32)},
		{IP: net.IPv4(10, 96, 0, 2), Mask: net.CIDRMask(24, 32)},
	},
}

// demo builds the pair, adds the links with rxe-link, runs the stream and
// removes everything again.
func demo(dur time.Duration, size string, channels, port int, sendFlags []string) (err error) {
	if _, err := topology.SetupPair(demoPair); err != nil { // no RDMA fields: the veth pair and addresses only
		return err
	}
	defer func() { err = errors.Join(err, topology.TeardownPair(demoPair)) }()
	var gids [2]string
	for i, dev := range []string{serverDev, senderDev} {
		out, aerr := exec.Command(tool("rxe-link"), "add", dev, demoPair.Netdevs[i]).CombinedOutput()
		if aerr != nil {
			return fmt.Errorf("rxe-link add %s %s: %v\n%s", dev, demoPair.Netdevs[i], aerr, out)
		}
		defer func() {
			if out, derr := exec.Command(tool("rxe-link"), "delete", dev).CombinedOutput(); derr != nil {
				err = errors.Join(err, fmt.Errorf("rxe-link delete %s: %v\n%s", dev, derr, out))
			}
		}()
		fmt.Print(indent("rxe-link add "+dev+" "+demoPair.Netdevs[i], string(out)))
		var gerr error
		if gids[i], gerr = gidIndex(string(out), dev, demoPair.Addrs[i].IP); gerr != nil {
			return gerr
		}
	}
	return run(dur, size, channels, gids, port, sendFlags)
}

// gidIndex picks the index of ip's GID from rxe-link's "NAME INDEX GID
// NETDEV" lines.
func gidIndex(out, dev string, ip net.IP) (string, error) {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == dev && net.ParseIP(f[2]).Equal(ip) {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("rxe-link printed no RoCE v2 GID of %v for %s:\n%s", ip, dev, out)
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

func run(dur time.Duration, size string, channels int, gids [2]string, port int, sendFlags []string) error {
	addr := serverAddr
	limit := dur + 60*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var srvOut bytes.Buffer
	srv := exec.CommandContext(ctx, tool("rocev2-server"), "-d", serverDev, "-g", gids[0], "-p", strconv.Itoa(port), "-once", "-q", "-check",
		"-timeout", limit.String())
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return err
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	for {
		ok, err := topology.Listening(port)
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
	sndArgs := append([]string{"-d", senderDev, "-g", gids[1], "-p", strconv.Itoa(port), "-t", dur.String(),
		"-n", "0", "-s", size, "-c", strconv.Itoa(channels)}, sendFlags...)
	snd := exec.CommandContext(ctx, tool("rocev2-send"), append(sndArgs, addr)...)
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
	v, err := readVerdict(out, string(sndOut))
	if err != nil {
		return errors.Join(err, exitErr("rocev2-server", srvErr))
	}
	fmt.Printf("rocev2-demo: received %s\n", v.rate)
	if err := v.check(); err != nil {
		return err
	}
	fmt.Printf("rocev2-demo: %d frames counted of %d sent: none lost, none out of order or duplicated, payloads intact\n", v.received, v.sent)
	// A clean verdict with a failed server is still a failure.
	return exitErr("rocev2-server", srvErr)
}

// exitErr names the program whose run failed; nil stays nil.
func exitErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
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
