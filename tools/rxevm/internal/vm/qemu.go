package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvKVM set to 1 boots with KVM. TCG is the default: on nested hosts like
// the ones this project is built on, -enable-kvm hangs after decompression.
const EnvKVM = "RXEVM_KVM"

// EnvICount holds QEMU's -icount options (e.g. "shift=5,sleep=on"): the
// guest's clocks then advance with the instructions it executes, not with
// the host's time, so what the guest measures does not move with the
// host's load. Empty: TCG on the host's clock.
const EnvICount = "RXEVM_ICOUNT"

// EnvPlugin loads a QEMU TCG plugin: its path, then its arguments,
// comma-separated as -plugin takes them (e.g. the instruction profiler in
// integration/testdata/insnprof). TCG only.
const EnvPlugin = "RXEVM_PLUGIN"

// EnvCPUs sets the guest's number of CPUs (default 2).
const EnvCPUs = "RXEVM_CPUS"

// Boot is one QEMU run of an initramfs.
type Boot struct {
	Kernel  string        // vmlinuz
	Initrd  string        // the cpio written by Image.Build
	Dir     string        // where console.log is written
	Timeout time.Duration // the whole run, boot included
	MemMB   int           // guest memory; 0 means 2048
	CPUs    int           // 0 means 2 (with 1, a polling process starves rxe's kernel work)
	KVM     bool
	ICount  string    // QEMU -icount options (EnvICount); TCG only
	Plugin  string    // QEMU -plugin argument (EnvPlugin); TCG only
	Arch    Arch      // the guest's; the zero value is the host's
	Extra   []string  // more QEMU arguments (the two-VM network)
	Output  io.Writer // the tests' output, markers removed
	Log     io.Writer // harness messages and console excerpts on failure
}

// Result is what a boot proved.
type Result struct {
	Status   int    // the guest's exit status; meaningful only when Finished
	Finished bool   // the exit marker was seen
	Oops     string // the first kernel oops/BUG/panic line on the console, if any
	Console  string // path of the kernel console log
}

// kernelTrouble matches console lines that make a run fail whatever the
// tests printed.
var kernelTrouble = regexp.MustCompile(`(Oops|BUG:|Kernel panic|general protection fault|KASAN:|UBSAN:)`)

// Run boots the VM and waits until it powers off, the timeout passes or ctx
// ends. Only the exit marker counts as finishing: a panic, a reboot or a
// hang without it is reported as not Finished.
func (b *Boot) Run(ctx context.Context) (Result, error) {
	mem, cpus := b.MemMB, b.CPUs
	if mem == 0 {
		mem = 2048
	}
	if cpus == 0 {
		cpus = 2
	}
	arch := b.Arch
	if arch.GOARCH == "" {
		var err error
		if arch, err = HostArch(); err != nil {
			return Result{}, err
		}
	}
	kvm := b.KVM && !arch.Foreign()
	if kvm && b.ICount != "" {
		return Result{}, fmt.Errorf("rxevm: %s=%s needs TCG, not KVM", EnvICount, b.ICount)
	}
	if kvm && b.Plugin != "" {
		return Result{}, fmt.Errorf("rxevm: %s=%s needs TCG, not KVM", EnvPlugin, b.Plugin)
	}
	console := filepath.Join(b.Dir, "console.log")
	args := qemuArgs(arch, b.Kernel, b.Initrd, console, mem, cpus, kvm, b.ICount)
	if b.Plugin != "" {
		args = append(args, "-plugin", b.Plugin)
	}
	args = append(args, b.Extra...)
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, arch.QEMU, args...)
	cmd.Stdin = nil
	// QEMU dies with us, even when we are killed with no chance to clean
	// up (go test's -timeout, a CI runner's SIGKILL): an orphaned VM keeps
	// both cores busy for the rest of its timeout. The parent-death signal
	// follows the thread that forked, so this goroutine keeps its thread
	// until QEMU has exited.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var qemuErr bytes.Buffer
	cmd.Stderr = &qemuErr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("rxevm: start qemu: %w", err)
	}
	res := Result{Console: console}
	tail := &lastLines{n: 30}
	res.Status, res.Finished = readGuest(stdout, b.Output, tail)
	waitErr := cmd.Wait()
	res.Oops = firstMatch(console, kernelTrouble)
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	switch {
	case timedOut:
		err = fmt.Errorf("rxevm: the VM did not finish within %v", b.Timeout)
	case !res.Finished:
		err = fmt.Errorf("rxevm: the guest never printed its exit marker (qemu: %v %s)", waitErr, strings.TrimSpace(qemuErr.String()))
	case res.Oops != "":
		err = fmt.Errorf("rxevm: kernel trouble on the console: %s", res.Oops)
	}
	if err != nil || res.Status != 0 {
		fmt.Fprintf(b.Log, "rxevm: last lines of the kernel console (%s):\n", console)
		printTail(b.Log, console, 40)
		if err != nil {
			fmt.Fprintf(b.Log, "rxevm: last lines of the guest output:\n%s", tail)
		}
	}
	return res, err
}

// qemuArgs is the QEMU command line for one boot: the kernel console on
// the first serial port into a file, the tests' output channel on stdout.
func qemuArgs(arch Arch, kernel, initrd, console string, mem, cpus int, kvm bool, icount string) []string {
	accel := []string{"-accel", "tcg", "-cpu", "max"}
	switch {
	case kvm:
		accel = []string{"-enable-kvm", "-cpu", "host"}
	case icount != "":
		// The real-time clock follows the virtual clock too, so that
		// nothing in the guest sees the host's time.
		accel = append(accel, "-icount", icount, "-rtc", "clock=vm")
	}
	cmdline := "console=" + arch.Console + " quiet loglevel=4 panic=-1 rdinit=/init"
	if arch.Append != "" {
		cmdline += " " + arch.Append
	}
	if icount != "" && !kvm {
		// Under -icount the TSC counts nanoseconds of virtual time (1 GHz)
		// and a second CPU's delay-loop calibration never finishes; Debian's
		// kernels run at HZ=250, so one jiffy is 4 000 000 loops. With a
		// fixed shift the kernel cannot start a second CPU at boot at all,
		// while the guest's /init starts the others in milliseconds.
		cmdline += " lpj=4000000"
		if cpus > 1 {
			cmdline += " maxcpus=1"
		}
	}
	args := append(accel, arch.QEMUArgs...)
	args = append(args,
		"-m", strconv.Itoa(mem), "-smp", strconv.Itoa(cpus),
		"-kernel", kernel, "-initrd", initrd,
		"-append", cmdline,
		"-nodefaults", "-display", "none", "-no-reboot",
		"-serial", "file:"+console, // the kernel's console
	)
	return append(args, arch.OutputArgs...)
}

// readGuest copies the guest's output to out, minus the markers, and
// returns the status from the exit marker, if one came.
func readGuest(r io.Reader, out io.Writer, tail *lastLines) (status int, finished bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if rest, ok := strings.CutPrefix(line, ExitMarker+" "); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				status, finished = n, true
			}
			continue
		}
		if line == StartMarker {
			continue
		}
		tail.add(line)
		fmt.Fprintln(out, line)
	}
	return status, finished
}

type lastLines struct {
	n     int
	lines []string
}

func (l *lastLines) add(s string) {
	l.lines = append(l.lines, s)
	if len(l.lines) > l.n {
		l.lines = l.lines[1:]
	}
}

func (l *lastLines) String() string {
	if len(l.lines) == 0 {
		return "  (none)\n"
	}
	return "  " + strings.Join(l.lines, "\n  ") + "\n"
}

func firstMatch(path string, re *regexp.Regexp) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if re.MatchString(line) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func printTail(w io.Writer, path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(w, "  (%v)\n", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", strings.TrimRight(l, "\r"))
	}
}
