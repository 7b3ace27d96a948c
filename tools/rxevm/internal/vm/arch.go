package vm

import (
	"debug/elf"
	"fmt"
	"os"
	"runtime"
)

// EnvArch picks the guest architecture: amd64 (the default on an amd64
// host) or arm64, which runs under qemu-system-aarch64 with TCG.
const EnvArch = "RXEVM_ARCH"

// Arch is everything that differs between guest architectures: the Go and
// Debian names, the QEMU that emulates it, the consoles and where the C
// tools' libraries live.
type Arch struct {
	GOARCH     string      // Go's name, also the test binaries' GOARCH
	Deb        string      // Debian's architecture name
	Triple     string      // multiarch directory, e.g. x86_64-linux-gnu
	Machine    elf.Machine // e_machine of its ELF binaries
	QEMU       string      // the qemu-system binary
	QEMUPkg    string      // the Debian package that installs QEMU
	KernelMeta string      // the linux-image meta package naming the current kernel
	Console    string      // the kernel console device (console= on the command line)
	Output     string      // the guest device the tests' output goes to
	// OutputModules are loaded before Output can be opened (none when the
	// device is built into the kernel).
	OutputModules []string
	// QEMUArgs are the machine options; the output channel is wired to
	// QEMU's stdout by OutputArgs.
	QEMUArgs   []string
	OutputArgs []string
	// Append is added to the kernel command line.
	Append string
}

// The supported guest architectures.
var (
	AMD64 = Arch{
		GOARCH: "amd64", Deb: "amd64", Triple: "x86_64-linux-gnu", Machine: elf.EM_X86_64,
		QEMU: "qemu-system-x86_64", QEMUPkg: "qemu-system-x86", KernelMeta: "linux-image-amd64",
		Console: "ttyS0", Output: "/dev/ttyS1",
		// clocksource=tsc: under TCG the kernel otherwise picks the HPET, and
		// every clock read (Go's runtime makes many) becomes an emulated MMIO
		// access; measured in ibv_rc_pingpong, 4 KiB polling went from 5.6 ms
		// to 0.6 ms per iteration.
		Append:     "clocksource=tsc tsc=reliable",
		OutputArgs: []string{"-serial", "stdio"}, // ttyS1, after the console's ttyS0
	}
	// ARM64: the virt machine has one PL011 UART (ttyAMA0, the kernel's
	// console); the tests' output goes through a virtio console, hvc0.
	ARM64 = Arch{
		GOARCH: "arm64", Deb: "arm64", Triple: "aarch64-linux-gnu", Machine: elf.EM_AARCH64,
		QEMU: "qemu-system-aarch64", QEMUPkg: "qemu-system-arm", KernelMeta: "linux-image-arm64",
		Console: "ttyAMA0", Output: "/dev/hvc0",
		OutputModules: []string{"virtio_mmio", "virtio_pci", "virtio_console"},
		QEMUArgs:      []string{"-M", "virt"},
		OutputArgs: []string{"-chardev", "stdio,id=out", "-device", "virtio-serial-pci,id=vser",
			"-device", "virtconsole,chardev=out,bus=vser.0"},
	}
)

// ArchByName returns the architecture Go calls name.
func ArchByName(name string) (Arch, error) {
	switch name {
	case "amd64":
		return AMD64, nil
	case "arm64":
		return ARM64, nil
	}
	return Arch{}, fmt.Errorf("rxevm: unsupported guest architecture %q (want amd64 or arm64)", name)
}

// HostArch is the architecture rxevm itself runs on.
func HostArch() (Arch, error) { return ArchByName(runtime.GOARCH) }

// Foreign reports whether the architecture differs from the host's: its
// C tools' libraries cannot come from the host then.
func (a Arch) Foreign() bool { return a.GOARCH != runtime.GOARCH }

// SelectArch decides the guest architecture from RXEVM_ARCH (env) and the
// test binary (binary may be ""): an explicit setting wins and must match
// the binary; without one the binary's own architecture is taken, and
// without either the host's.
func SelectArch(env, binary string) (Arch, error) {
	var fromBin *Arch
	if binary != "" {
		m, err := elfMachine(binary)
		if err != nil {
			return Arch{}, err
		}
		for _, a := range []Arch{AMD64, ARM64} {
			if a.Machine == m {
				fromBin = &a
			}
		}
		if fromBin == nil {
			return Arch{}, fmt.Errorf("rxevm: %s is built for %v, which no guest runs", binary, m)
		}
	}
	switch {
	case env != "":
		a, err := ArchByName(env)
		if err != nil {
			return Arch{}, err
		}
		if fromBin != nil && fromBin.GOARCH != a.GOARCH {
			return Arch{}, fmt.Errorf("rxevm: %s=%s but %s is built for %s (set GOARCH=%s for go test)",
				EnvArch, env, binary, fromBin.GOARCH, a.GOARCH)
		}
		return a, nil
	case fromBin != nil:
		return *fromBin, nil
	}
	return HostArch()
}

// elfMachine returns the e_machine of an ELF file.
func elfMachine(path string) (elf.Machine, error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, fmt.Errorf("rxevm: %s: %w", path, err)
	}
	defer f.Close()
	return f.Machine, nil
}

// IsStatic reports whether the ELF executable at path needs no dynamic
// loader (no PT_INTERP), so it runs in a guest without libc.
func IsStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, fmt.Errorf("rxevm: %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// ArchFromEnv is SelectArch for commands that run no test binary.
func ArchFromEnv() (Arch, error) { return SelectArch(os.Getenv(EnvArch), "") }
