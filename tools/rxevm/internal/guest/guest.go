// Package guest is /init in the rxevm initramfs: rxevm itself, built
// statically for the guest, runs Main when it finds itself PID 1. It mounts
// the kernel's filesystems, loads the planned kernel modules, builds the
// planned topology, runs the planned commands with their output on the
// plan's output port, prints the run's exit marker and powers the VM off.
// There is no shell in the image; everything the guest does is here.
package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/tools/rxevm/internal/vm"
	"github.com/pureverbs/pureverbs/tools/rxevm/topology"
	"golang.org/x/sys/unix"
)

// Main runs the plan at vm.PlanPath and powers the machine off; it never
// returns. Until the output port is open, messages go to the kernel's
// console (which the host prints when no exit marker arrives).
func Main() {
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
		select {} // PID 1 must not exit: that panics the kernel
	}()
	if err := mountAll(); err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return
	}
	if err := onlineCPUs(); err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return
	}
	plan, err := vm.ReadPlan(vm.PlanPath)
	if err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return
	}
	// The modules come first: the output port's driver may be one of them.
	for _, m := range plan.Modules {
		if err := rxelink.LoadModuleFile(m); err != nil {
			fmt.Fprintln(out, "rxevm-init:", err)
			return
		}
	}
	tty, err := openOutput(plan.Output)
	if err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return
	}
	out = tty
	fmt.Fprintln(out, vm.StartMarker)
	status = run(out, plan)
}

func run(out io.Writer, plan *vm.Plan) int {
	eps, err := topology.Setup(topology.Kind(plan.Topology))
	if err != nil {
		fmt.Fprintln(out, "rxevm-init:", err)
		return 1
	}
	var devs, gids []string
	for _, e := range eps {
		devs = append(devs, e.RDMA)
		gids = append(gids, strconv.Itoa(e.GIDIndex))
	}
	env := append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=/tmp",
		"TMPDIR=/tmp",
		"LD_LIBRARY_PATH=" + libPath(),
		"RXEVM=1",
		// rxetest helpers fail rather than skip inside the VM.
		"RXETEST_REQUIRE=1",
		"RXEVM_TOPOLOGY=" + string(plan.Topology),
		"RXEVM_DEVICES=" + strings.Join(devs, " "),
		// The index of each device's RoCE v2 GID of its IPv4 address, in
		// RXEVM_DEVICES' order: found, not assumed to be 1.
		"RXEVM_GID_INDEXES=" + strings.Join(gids, " "),
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

// libPath is where the C tools' libraries are, by the guest's architecture.
func libPath() string {
	triple := "x86_64-linux-gnu"
	if runtime.GOARCH == "arm64" {
		triple = "aarch64-linux-gnu"
	}
	return "/lib/" + triple + ":/usr/lib/" + triple
}

// openOutput opens the result port in raw mode, so the host sees the bytes
// the tests wrote (no \n to \r\n translation). A virtio console appears a
// moment after its module loads, so the port is waited for briefly.
func openOutput(port string) (*os.File, error) {
	if port == "" {
		port = "/dev/ttyS1"
	}
	var f *os.File
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		f, err = os.OpenFile(port, os.O_WRONLY|unix.O_NOCTTY, 0)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("output port: %w", err)
	}
	t, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err == nil {
		t.Oflag &^= unix.OPOST
		t.Cflag |= unix.B115200
		_ = unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, t)
	}
	return f, nil
}
