// Command rxe-link is what a host without kmod or iproute2 needs before any
// verb: it loads rdma_rxe (with its dependencies, from the running kernel's
// modules.dep) when the kernel has not, adds, lists and deletes rxe links,
// and waits for a link's RoCE v2 GIDs. It is package rxe/rxelink as a
// static command (CGO_ENABLED=0 go build ./tools/rxe-link).
//
//	rxe-link load                        # modprobe rdma_rxe
//	rxe-link modprobe MODULE...          # modprobe, for any module
//	rxe-link add [-timeout 15s] NAME NETDEV   # rdma link add NAME type rxe netdev NETDEV, then gids
//	rxe-link gids [-timeout 15s] NAME    # wait for the RoCE v2 GIDs and print them
//	rxe-link list                        # NAME NETDEV, one link a line
//	rxe-link delete [-timeout 10s] NAME  # rdma link delete NAME, or name who holds it open
//
// add loads rdma_rxe first when it is not loaded. gids (and add) print one
// line per RoCE v2 entry, "NAME INDEX GID NETDEV", once every IPv4 address
// of the netdev has one; the index is the one to connect with (-g of the
// C tools). delete fails, naming each process with its fds and mappings,
// when the device is held open past the timeout: the kernel would wait for
// them for ever. Exit status 0 on success, 1 on failure, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
)

const usage = `usage: rxe-link load
       rxe-link modprobe MODULE...
       rxe-link add [-timeout 15s] NAME NETDEV
       rxe-link gids [-timeout 15s] NAME
       rxe-link list
       rxe-link delete [-timeout 10s] NAME`

// errUsage marks a command line rxe-link cannot run.
var errUsage = errors.New(usage)

func main() {
	err := run(os.Stdout, os.Args[1:])
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "rxe-link:", err)
		os.Exit(1)
	}
}

// run carries out one command line; its output goes to w.
func run(w io.Writer, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("rxe-link "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait")
	if cmd == "delete" {
		*timeout = 10 * time.Second
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w\n%v", errUsage, err)
	}
	args = fs.Args()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch {
	case cmd == "load" && len(args) == 0:
		return rxelink.LoadRxe()
	case cmd == "modprobe" && len(args) > 0:
		return modprobe(w, args)
	case cmd == "add" && len(args) == 2:
		if err := rxelink.LoadRxe(); err != nil {
			return err
		}
		if err := rxelink.Add(args[0], args[1]); err != nil {
			return err
		}
		return printGIDs(ctx, w, args[0])
	case cmd == "gids" && len(args) == 1:
		return printGIDs(ctx, w, args[0])
	case cmd == "list" && len(args) == 0:
		links, err := rxelink.List()
		if err != nil {
			return err
		}
		for _, l := range links {
			fmt.Fprintf(w, "%s %s\n", l.Name, l.Netdev)
		}
		return nil
	case cmd == "delete" && len(args) == 1:
		return rxelink.Delete(ctx, args[0])
	}
	return errUsage
}

func modprobe(w io.Writer, names []string) error {
	dir, err := rxelink.ModulesDir()
	if err != nil {
		return err
	}
	idx, err := rxelink.ReadModuleIndex(dir)
	if err != nil {
		return err
	}
	loaded, err := idx.Load(names...)
	for _, f := range loaded {
		fmt.Fprintf(w, "loaded %s\n", f)
	}
	return err
}

func printGIDs(ctx context.Context, w io.Writer, name string) error {
	gids, err := rxelink.WaitGIDs(ctx, name)
	if err != nil {
		return err
	}
	for _, g := range gids {
		fmt.Fprintf(w, "%s %d %s %s\n", name, g.Index, g.GID.Addr(), netdevName(g.NetdevIndex))
	}
	return nil
}

// netdevName names the netdev of a GID entry ("" for none, its index for
// one gone meanwhile).
func netdevName(ifindex int) string {
	if ifindex == 0 {
		return ""
	}
	if ifi, err := net.InterfaceByIndex(ifindex); err == nil {
		return ifi.Name
	}
	return strconv.Itoa(ifindex)
}
