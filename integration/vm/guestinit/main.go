// Command guestinit is /init in the rxevm initramfs: it mounts the kernel's
// filesystems, loads the rdma_rxe modules, builds the planned topology, runs
// the planned commands with their output on the second serial port, prints
// the run's exit marker and powers the VM off. There is no shell in the image;
// everything the guest does is here.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/integration/topology"
	"github.com/pureverbs/pureverbs/integration/vm"
)

// The host reads ttyS1 for results; the kernel's console is ttyS0.
const outputPort = "/dev/ttyS1"

func main() {
	status := 1
	out := io.Writer(os.Stderr)
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(out, "rxevm-init: panic: %v\n", r)
			status = 1
		}
		fmt.Fprintf(out, "\n%s %d\n", vm.ExitMarker, status)
		unix.Sync()
		unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	}()
	if err := mountAll(); err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return
	}
	tty, err := openOutput()
	if err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return
	}
	out = tty
	fmt.Fprintln(out, vm.StartMarker)
	status = run(out)
}

func run(out io.Writer) int {
	plan, err := vm.ReadPlan(vm.PlanPath)
	if err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return 1
	}
	for _, m := range plan.Modules {
		if err := loadModule(m); err != nil {
			fmt.Fprintln(out, "rxevm-init:", err)
			return 1
		}
	}
	eps, err := topology.Setup(topology.Kind(plan.Topology))
	if err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return 1
	}
	var devs []string
	for _, e := range eps {
		devs = append(devs, e.RDMA)
	}
	env := append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=/tmp",
		"TMPDIR=/tmp",
		"LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu",
		"RXEVM=1",
		"RXEVM_TOPOLOGY=" + string(plan.Topology),
		"RXEVM_DEVICES=" + strings.Join(devs, " "),
	}, plan.Env...)
	if peer := topology.Peer(topology.Kind(plan.Topology)); peer != nil {
		env = append(env, "RXEVM_PEER="+peer.String(), "RXEVM_ROLE="+strings.TrimPrefix(string(plan.Topology), "twovm-"))
	}
	status := 0
	for _, c := range plan.Commands {
		if s := runCommand(out, c, env); s != 0 && status == 0 {
			status = s
		}
	}
	return status
}

func runCommand(out io.Writer, c vm.Command, env []string) int {
	ctx := context.Background()
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(c.Timeout))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = append(env, c.Env...)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = "/tmp"
	}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		fmt.Fprintf(out, "rxevm-init: %s: timed out after %v\n", c.Path, time.Duration(c.Timeout))
		return 124
	case errors.As(err, &exit):
		if exit.ExitCode() < 0 {
			fmt.Fprintf(out, "rxevm-init: %s: %v\n", c.Path, err)
			return 1
		}
		return exit.ExitCode()
	default:
		fmt.Fprintf(out, "rxevm-init: %s: %v\n", c.Path, err)
		return 1
	}
}

func mountAll() error {
	for _, m := range []struct{ fs, dir string }{
		{"proc", "/proc"}, {"sysfs", "/sys"}, {"devtmpfs", "/dev"}, {"tmpfs", "/tmp"}, {"tmpfs", "/run"},
	} {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fs, m.dir, m.fs, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fs, m.dir, err)
		}
	}
	return nil
}

// openOutput opens the result port in raw mode, so the host sees the bytes
// the tests wrote (no \n to \r\n translation).
func openOutput() (*os.File, error) {
	f, err := os.OpenFile(outputPort, os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	t, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err == nil {
		t.Oflag &^= unix.OPOST
		t.Cflag |= unix.B115200
		_ = unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, t)
	}
	return f, nil
}

// loadModule loads one .ko (or a compressed .ko.xz/.ko.zst/.ko.gz, which
// kernels built with MODULE_DECOMPRESS unpack themselves).
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := 0
	if !strings.HasSuffix(path, ".ko") {
		flags |= unix.MODULE_INIT_COMPRESSED_FILE
	}
	if err := unix.FinitModule(int(f.Fd()), "", flags); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("finit_module %s: %w", path, err)
	}
	return nil
}
