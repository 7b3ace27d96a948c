// Command devinfo prints what rdma-core's ibv_devinfo prints, read through
// pureverbs instead of libibverbs: the same fields, order, formatting and
// value names, for every device or the one asked for.
//
//	devinfo [-d dev] [-i port] [-l] [-v]
//
// -d (--ib-dev) picks a device (default all), -i (--ib-port) one port
// (default all), -l (--list) lists the device names only, -v (--verbose)
// adds every device and port attribute, the GID table included.
//
// Exit status as ibv_devinfo's: 255 for a device that is not there, no
// devices, or a bad option; otherwise the OR of each device's status (1: the
// device would not open, 2: query_device failed, 4: the port asked for does
// not exist, a failing query_port its errno, and a failing GID table read 255).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

var optionSpecs = []getopt.Spec{
	{Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
	{Short: 'l', Long: "list"}, {Short: 'v', Long: "verbose"},
}

func main() {
	os.Exit(run(os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// usage is rdma-core v44's text (the tools in the VM); v56 says "default all
// devices" for -d, which is what both versions do.
func usage(w io.Writer, argv0 string) {
	fmt.Fprintf(w, "Usage: %s             print the ca attributes\n\n", argv0)
	fmt.Fprintf(w, "Options:\n")
	fmt.Fprintf(w, "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n")
	fmt.Fprintf(w, "  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n")
	fmt.Fprintf(w, "  -l, --list             print only the IB devices names\n")
	fmt.Fprintf(w, "  -v, --verbose          print all the attributes of the IB device(s)\n")
}

// strtol0 reads a number the way strtol(s, NULL, 0) does: leading
// blanks, a sign, then decimal, 0x hex or 0 octal digits as far as they
// go; no digits is 0.
func strtol0(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	base := 10
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[2])):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	var v int64
	for _, c := range s {
		d, err := strconv.ParseInt(string(c), base, 64)
		if err != nil {
			break
		}
		v = v*int64(base) + d
		if v > 1<<40 { // far past any port number; stop before overflowing
			break
		}
	}
	if neg {
		v = -v
	}
	return v
}

// run is the whole program; it returns the exit status.
func run(argv0 string, args []string, stdout, stderr io.Writer) int {
	vals, _, err := getopt.Parse(optionSpecs, args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", argv0, err)
		usage(stdout, argv0)
		return 255
	}
	var (
		devName string
		ibPort  int64
		verbose bool
	)
	for _, v := range vals {
		switch v.Short {
		case 'd':
			devName = v.Arg
		case 'i':
			if ibPort = strtol0(v.Arg); ibPort <= 0 {
				usage(stdout, argv0)
				return 1
			}
		case 'v':
			verbose = true
		case 'l':
			// ibv_devinfo lists and exits as soon as it meets -l.
			return list(stdout, stderr)
		}
	}
	devs, err := uverbs.Devices()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %v\n", err)
		return 255
	}
	if devName != "" {
		for _, d := range devs {
			if d.Name == devName {
				return show(stdout, stderr, d, uint8(ibPort), verbose)
			}
		}
		fmt.Fprintf(stderr, "IB device '%s' wasn't found\n", devName)
		return 255
	}
	if len(devs) == 0 {
		fmt.Fprintf(stderr, "No IB devices found\n")
		return 255
	}
	status := 0
	for _, d := range devs {
		status |= show(stdout, stderr, d, uint8(ibPort), verbose)
	}
	return status & 0xff
}

func list(stdout, stderr io.Writer) int {
	devs, err := uverbs.Devices()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %v\n", err)
		return 255
	}
	s := "s"
	if len(devs) == 1 {
		s = ""
	}
	fmt.Fprintf(stdout, "%d HCA%s found:\n", len(devs), s)
	for _, d := range devs {
		fmt.Fprintf(stdout, "\t%s\n", d.Name)
	}
	fmt.Fprintln(stdout)
	return 0
}

// show prints one device (only port onlyPort unless it is 0) and returns
// its status. Like ibv_devinfo, a failing port query ends the device's
// output where it failed.
func show(stdout, stderr io.Writer, d uverbs.Device, onlyPort uint8, verbose bool) (status int) {
	ctx, err := uverbs.Open(d)
	if err != nil {
		fmt.Fprintf(stderr, "Failed to open device: %v\n", err)
		return 1
	}
	defer func() {
		if err := ctx.Close(); err != nil {
			fmt.Fprintf(stderr, "Failed to close device: %v", err)
			status = 3
		}
	}()
	attr, err := ctx.QueryDevice()
	if err != nil {
		fmt.Fprintf(stderr, "Failed to query device props: %v\n", err)
		return 2
	}
	if onlyPort != 0 && int(onlyPort) > attr.PhysPortCnt {
		fmt.Fprintf(stderr, "Invalid port requested for device\n")
		return 4
	}
	h := hca{name: d.Name, transport: d.NodeType.Transport(), boardID: d.BoardID, attr: attr, compVectors: ctx.NumCompVectors()}
	var b strings.Builder
	h.header(&b, verbose)
	io.WriteString(stdout, b.String())
	var table []uverbs.GIDEntry
	if verbose {
		if table, err = ctx.QueryGIDTable(); err != nil {
			fmt.Fprintf(stderr, "Failed to query the GID table: %v\n", err)
			return 255
		}
	}
	for num := 1; num <= attr.PhysPortCnt; num++ {
		if onlyPort != 0 && num != int(onlyPort) {
			continue
		}
		pa, err := ctx.QueryPort(uint8(num))
		if err != nil {
			fmt.Fprintf(stderr, "Failed to query port %d props: %v\n", num, err)
			var errno unix.Errno
			if errors.As(err, &errno) {
				return int(errno) // ibv_query_port's answer is the errno
			}
			return 255
		}
		b.Reset()
		h.port(&b, &port{num: uint8(num), attr: pa, gids: portGIDs(table, uint8(num))}, verbose)
		io.WriteString(stdout, b.String())
	}
	return status
}
