// Command rxevm runs programs and tests against real rdma_rxe inside a QEMU
// VM booted with Debian's kernel, for hosts whose own kernel has no
// InfiniBand support. It works from any Go module:
//
//	go get -tool github.com/pureverbs/pureverbs/tools/rxevm
//	CGO_ENABLED=0 go test -exec 'go tool rxevm exec' ./...
//
// Commands:
//
//	rxevm setup                         install qemu, fetch and cache the kernel and rdma-core's tools
//	rxevm exec BINARY [ARGS...]         run a test binary in the VM (for go test -exec)
//	rxevm run [-topology T] [-extra F] -- CMD...   run guest commands, e.g. /usr/local/bin/rxe-info
//	rxevm host-setup [-topology T]      build the same topology on this host (loads rdma_rxe if needed)
//	rxevm host-teardown [-topology T]   remove it again
//	rxevm uapi                          print the include dir of Debian 13's uapi headers (fetched once) for the ABI pins; installs gcc if missing
//
// The guest's /init is rxevm itself, built statically for the guest from
// the pureverbs version this rxevm was built from (see vm.SourceDir); it
// runs the guest side when it finds itself PID 1. Without a pureverbs source
// to build from, a static rxevm (CGO_ENABLED=0) copies itself in as /init
// instead, and the image has no pureverbs tools. Every other command under
// pureverbs' tools/ is built the same way and placed at /usr/local/bin,
// beside pureverbs' own C peers (vm.CPeerDir, compiled with gcc) when the
// binary under test is one of pureverbs' own or RXEVM_CPEERS=1;
// rdma-core's C tools (ibv_rc_pingpong, perftest, ...) are at /usr/bin, and
// RXEVM_EXTRA=prog[:guestpath],... adds programs of your own. The exit
// status is the guest's.
//
// The cache (kernels, C tools) is $XDG_CACHE_HOME/pureverbs/rxevm unless
// RXEVM_CACHE names another; it is shared safely between projects and
// concurrent runs. RXEVM_ARCH=arm64 boots Debian's arm64 kernel under
// qemu-system-aarch64 (test binaries built with GOARCH=arm64 select it by
// themselves); RXEVM_SUITE=trixie boots Debian 13's kernel.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/tools/rxevm/internal/guest"
	"github.com/pureverbs/pureverbs/tools/rxevm/internal/vm"
	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
)

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  rxevm setup
  rxevm exec BINARY [ARGS...]
  rxevm run [-topology veth|loopback|twovm] [-timeout D] [-extra PATH[:GUEST],...] -- GUEST-COMMAND [ARGS...]
  rxevm host-setup [-topology veth|loopback]
  rxevm host-teardown [-topology veth|loopback]
  rxevm uapi
environment: RXEVM_CACHE, RXEVM_ARCH (amd64, arm64), RXEVM_SUITE (kernel's Debian suite, default bookworm),
  RXEVM_KERNEL_PACKAGE, RXEVM_KERNEL_REFRESH=1, RXEVM_KERNEL + RXEVM_MODULES, RXEVM_KVM=1, RXEVM_ICOUNT (QEMU -icount options: guest time by instructions), RXEVM_PLUGIN (QEMU TCG plugin,args), RXEVM_TOPOLOGY (veth, loopback, twovm, none),
  RXEVM_UNLOADED (modules in the image the guest does not load), RXEVM_TIMEOUT, RXEVM_MEM (MiB), RXEVM_CPUS (default 2), RXEVM_EXTRA (programs to add: path[:guest path],...), RXEVM_SOURCE,
  RXEVM_CPEERS (1: add pureverbs' C peers to every image, 0: to none; default: for pureverbs' own test binaries)`)
	os.Exit(2)
}

func main() {
	if os.Getpid() == 1 {
		guest.Main() // we are the VM's /init
	}
	if len(os.Args) < 2 {
		usage()
	}
	// SIGTERM (a CI runner's or timeout(1)'s) ends the VM the same way as
	// Ctrl-C: the context stops QEMU and the temporary files are removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var (
		status int
		err    error
	)
	switch os.Args[1] {
	case "setup":
		err = setup()
	case "exec":
		if len(os.Args) < 3 {
			usage()
		}
		status, err = execTest(ctx, os.Args[2], os.Args[3:])
	case "run":
		status, err = runCommands(ctx, os.Args[2:])
	case "uapi":
		err = uapi()
	case "host-setup", "host-teardown":
		fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
		topo := fs.String("topology", envOr("RXEVM_TOPOLOGY", "veth"), "topology to build")
		fs.Parse(os.Args[2:])
		if os.Args[1] == "host-setup" {
			// modprobe rdma_rxe, through modules.dep, when it is not loaded.
			err = rxelink.LoadRxe()
			var eps []topology.Endpoint
			if err == nil {
				eps, err = topology.Setup(topology.Kind(*topo))
			}
			for _, e := range eps {
				if err == nil {
					fmt.Printf("%s on %s %s, RoCE v2 GID index %d\n", e.RDMA, e.Netdev, e.Addr.String(), e.GIDIndex)
				}
			}
		} else {
			err = topology.Teardown(topology.Kind(*topo))
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if status == 0 {
			status = 1
		}
	}
	os.Exit(status)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// uapi prints the include directory of the uapi headers the ABI pins
// compile against, fetching them (and installing gcc) first if needed.
func uapi() error {
	c, err := vm.DefaultCache(vm.Arch{}, os.Stderr)
	if err != nil {
		return err
	}
	dir, err := c.UAPIHeaders()
	if err != nil {
		return err
	}
	fmt.Println(dir)
	return nil
}

func setup() error {
	arch, err := vm.ArchFromEnv()
	if err != nil {
		return err
	}
	c, err := vm.DefaultCache(arch, os.Stderr)
	if err != nil {
		return err
	}
	if err := c.EnsureHostTools(); err != nil {
		return err
	}
	k, err := c.Kernel()
	if err != nil {
		return err
	}
	peers, err := c.Peers()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "rxevm: %s kernel %s\nrxevm: modules %s\nrxevm: rdma-core tools %s\n", arch.GOARCH, k.Image, k.Modules, peers)
	return nil
}

// prepared is a cache with everything a boot needs, and the run's own
// directory (programs, images, console logs), which no other run touches.
type prepared struct {
	cache  *vm.Cache
	arch   vm.Arch
	kernel vm.Kernel
	peers  string
	dir    string
	progs  vm.GuestPrograms
	extra  map[string]string // guest path -> host file, from RXEVM_EXTRA / -extra
}

// prepare readies a boot; cpeers adds pureverbs' own C peers to the image
// (see wantCPeers).
func prepare(arch vm.Arch, extra string, cpeers bool) (*prepared, error) {
	c, err := vm.DefaultCache(arch, os.Stderr)
	if err != nil {
		return nil, err
	}
	if err := c.EnsureHostTools(); err != nil {
		return nil, err
	}
	p := &prepared{cache: c, arch: arch}
	if p.extra, err = parseExtra(extra, arch); err != nil {
		return nil, err
	}
	if p.kernel, err = c.Kernel(); err != nil {
		return nil, err
	}
	if p.peers, err = c.Peers(); err != nil {
		return nil, err
	}
	runs := filepath.Join(c.Dir, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return nil, err
	}
	if p.dir, err = os.MkdirTemp(runs, "run-"); err != nil {
		return nil, err
	}
	src, err := sourceDir()
	if err != nil {
		// No pureverbs source to build from: this very binary can still be
		// the guest's /init, without the pureverbs tools.
		self, serr := selfAsInit(arch)
		if serr != nil {
			os.RemoveAll(p.dir)
			return nil, fmt.Errorf("%w\n%w", err, serr)
		}
		fmt.Fprintf(os.Stderr, "rxevm: %v\nrxevm: booting with this rxevm as /init and without pureverbs' tools\n", err)
		p.progs = vm.GuestPrograms{Init: self}
		return p, nil
	}
	if p.progs, err = vm.BuildGuest(src, arch, filepath.Join(p.dir, "bin")); err != nil {
		os.RemoveAll(p.dir)
		return nil, err
	}
	if !cpeers {
		return p, nil
	}
	// pureverbs' own C peers go beside its Go tools.
	bins, err := c.CPeers(src, p.peers)
	if err != nil {
		os.RemoveAll(p.dir)
		return nil, err
	}
	for name, bin := range bins {
		p.progs.Tools[name] = bin
	}
	return p, nil
}

func sourceDir() (string, error) {
	origin, err := vm.SelfOrigin()
	if err != nil {
		return "", err
	}
	return vm.SourceDir(origin)
}

// selfAsInit returns this executable when it can be the guest's /init: built
// for the guest's architecture and static (CGO_ENABLED=0).
func selfAsInit(arch vm.Arch) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("rxevm: cannot be the guest's /init: %w", err)
	}
	if arch.Foreign() {
		return "", fmt.Errorf("rxevm: cannot be the %s guest's /init: it is built for %s", arch.GOARCH, runtime.GOARCH)
	}
	static, err := vm.IsStatic(self)
	if err != nil {
		return "", err
	}
	if !static {
		return "", fmt.Errorf("rxevm: cannot be the guest's /init: %s is dynamically linked (build it with CGO_ENABLED=0)", self)
	}
	return self, nil
}

// finish removes the run's directory after a passing run; after a failing
// one it keeps the console logs and removes only the programs and images.
func (p *prepared) finish(status int, err error) {
	if status == 0 && err == nil {
		os.RemoveAll(p.dir)
		return
	}
	os.RemoveAll(filepath.Join(p.dir, "bin"))
	images, _ := filepath.Glob(filepath.Join(p.dir, "*", "initrd.cpio"))
	for _, im := range images {
		os.Remove(im)
	}
}

// boot builds an image around plan and files and runs it; a two-VM plan
// boots a pair.
func (p *prepared) boot(ctx context.Context, plan *vm.Plan, files map[string]string, timeout time.Duration) (status int, err error) {
	defer func() { p.finish(status, err) }()
	for t, host := range p.progs.Tools {
		files["/usr/local/bin/"+t] = host
	}
	for g, host := range p.extra {
		files[g] = host
	}
	plan.Output = p.arch.Output
	if plan.Topology != vm.TopologyTwoVM {
		return p.bootOne(ctx, *plan, files, timeout, nil, os.Stdout)
	}
	return p.bootPair(ctx, *plan, files, timeout)
}

// bootPair runs the plan on two VMs joined by a QEMU socket netdev: A
// listens on a loopback port and B connects to it. The run's status is the
// worse of the two.
func (p *prepared) bootPair(ctx context.Context, plan vm.Plan, files map[string]string, timeout time.Duration) (int, error) {
	port, err := freePort()
	if err != nil {
		return 1, err
	}
	nic := func(mode, mac string) []string {
		return []string{"-netdev", fmt.Sprintf("socket,id=n0,%s=127.0.0.1:%d", mode, port),
			"-device", "virtio-net-pci,netdev=n0,mac=" + mac}
	}
	type result struct {
		status int
		err    error
	}
	a := make(chan result, 1)
	planA, planB := plan, plan
	planA.Topology, planB.Topology = vm.Topology("twovm-a"), vm.Topology("twovm-b")
	go func() {
		s, err := p.bootOne(ctx, planA, files, timeout, nic("listen", "52:54:00:99:01:01"), os.Stdout)
		a <- result{s, err}
	}()
	if err := waitListening(port, 30*time.Second); err != nil {
		return 1, err
	}
	sb, errB := p.bootOne(ctx, planB, files, timeout, nic("connect", "52:54:00:99:01:02"), &prefixWriter{prefix: "[vm b] ", w: os.Stdout})
	ra := <-a
	status := max(ra.status, sb)
	return status, errors.Join(ra.err, errB)
}

func (p *prepared) bootOne(ctx context.Context, plan vm.Plan, files map[string]string, timeout time.Duration, extra []string, out io.Writer) (int, error) {
	dir, err := os.MkdirTemp(p.dir, "vm-")
	if err != nil {
		return 1, err
	}
	modules := append(append([]string{}, p.arch.OutputModules...), vm.RxeModules...)
	if extra != nil {
		modules = append(append([]string{}, vm.NICModules...), modules...)
	}
	im := vm.Image{
		Init:    p.progs.Init,
		Arch:    p.arch,
		Plan:    &plan,
		Kernel:  p.kernel,
		Peers:   p.peers,
		Files:   files,
		Modules: modules,
		// RXEVM_UNLOADED=rdma_rxe,crc32_generic: in the image, not loaded.
		Unloaded: strings.FieldsFunc(os.Getenv("RXEVM_UNLOADED"), func(r rune) bool { return r == ',' || r == ' ' }),
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := im.Build(initrd); err != nil {
		return 1, err
	}
	mem, cpus := 0, 0
	fmt.Sscan(os.Getenv("RXEVM_MEM"), &mem)
	fmt.Sscan(os.Getenv(vm.EnvCPUs), &cpus)
	b := vm.Boot{
		Kernel: p.kernel.Image, Initrd: initrd, Dir: dir, Timeout: timeout, MemMB: mem, CPUs: cpus, Arch: p.arch,
		KVM: os.Getenv(vm.EnvKVM) == "1", ICount: os.Getenv(vm.EnvICount),
		Plugin: os.Getenv(vm.EnvPlugin), Output: out, Log: os.Stderr, Extra: extra,
	}
	res, err := b.Run(ctx)
	if err != nil {
		return 1, err
	}
	if res.Status != 0 {
		return res.Status, fmt.Errorf("rxevm: guest exit status %d (console: %s)", res.Status, res.Console)
	}
	return 0, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until VM A's QEMU listens on port (see topology.Listening).
func waitListening(port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ok, err := topology.Listening(port)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("rxevm: VM A never listened on 127.0.0.1:%d", port)
}

// prefixWriter marks the second VM's lines.
type prefixWriter struct {
	prefix string
	w      io.Writer
	mid    bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	var buf []byte
	for _, c := range b {
		if !p.mid {
			buf = append(buf, p.prefix...)
		}
		buf = append(buf, c)
		p.mid = c != '\n'
	}
	if _, err := p.w.Write(buf); err != nil {
		return 0, err
	}
	return len(b), nil
}

func topologyFromEnv() vm.Topology {
	return vm.Topology(envOr("RXEVM_TOPOLOGY", string(vm.TopologyVeth)))
}

// vmTimeout is the test binary's own -test.timeout plus room for the boot.
func vmTimeout(args []string) time.Duration {
	if v := os.Getenv("RXEVM_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	d := 10 * time.Minute
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-test.timeout="); ok {
			if t, err := time.ParseDuration(v); err == nil && t > 0 {
				d = t
			}
		}
	}
	return d + 3*time.Minute
}

func execTest(ctx context.Context, binary string, args []string) (int, error) {
	arch, err := vm.SelectArch(os.Getenv(vm.EnvArch), binary)
	if err != nil {
		return 1, err
	}
	cpeers, err := wantCPeers(binary)
	if err != nil {
		return 1, err
	}
	p, err := prepare(arch, os.Getenv(envExtra), cpeers)
	if err != nil {
		return 1, err
	}
	guest := "/rxevm/bin/" + filepath.Base(binary)
	timeout := vmTimeout(args)
	plan := &vm.Plan{
		Topology: topologyFromEnv(),
		Commands: []vm.Command{{Path: guest, Args: args, Timeout: vm.Duration(timeout - 2*time.Minute)}},
		Env:      passEnv(),
	}
	return p.boot(ctx, plan, map[string]string{guest: binary}, timeout)
}

// passEnv forwards the RXEVM_* and RXETEST_* settings tests read (e.g.
// RXEVM_SOAK) into the guest.
func passEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if (strings.HasPrefix(kv, "RXEVM_") || strings.HasPrefix(kv, "RXETEST_")) && !strings.HasPrefix(kv, "RXEVM_TOPOLOGY=") {
			env = append(env, kv)
		}
	}
	return env
}

func runCommands(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	topo := fs.String("topology", string(topologyFromEnv()), "veth, loopback or twovm")
	timeout := fs.Duration("timeout", 5*time.Minute, "limit for the whole VM run")
	extra := fs.String("extra", os.Getenv(envExtra), "static programs to add: PATH[:GUEST-PATH],... (default /usr/local/bin/<name>)")
	fs.Parse(args)
	if fs.NArg() == 0 {
		return 2, errors.New("rxevm run: no guest command given")
	}
	arch, err := vm.ArchFromEnv()
	if err != nil {
		return 1, err
	}
	cpeers, err := wantCPeers("")
	if err != nil {
		return 1, err
	}
	p, err := prepare(arch, *extra, cpeers)
	if err != nil {
		return 1, err
	}
	plan := &vm.Plan{
		Topology: vm.Topology(*topo),
		Commands: []vm.Command{{Path: fs.Arg(0), Args: fs.Args()[1:], Timeout: vm.Duration(*timeout - time.Minute)}},
		Env:      passEnv(),
	}
	return p.boot(ctx, plan, map[string]string{}, *timeout)
}
