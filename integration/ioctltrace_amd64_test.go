//go:build integration

package integration

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rdmaVerbsIoctl is RDMA_VERBS_IOCTL, _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr).
const rdmaVerbsIoctl = 0xc0181b01

// ioctlShape is one RDMA_VERBS_IOCTL command as the kernel received it,
// without the values that differ from run to run (handles, addresses): the
// method and, in order, every attribute's id, length and flags.
type ioctlShape struct {
	Object, Method uint16
	Attrs          []attrShape
}

type attrShape struct{ ID, Len, Flags uint16 }

// traceIoctls runs name with args under ptrace, following every thread,
// and returns each RDMA_VERBS_IOCTL it makes (decoded from its memory at
// syscall entry, which strace does not do) and its output. Only the
// tracee's own threads are waited for, so other children of the test
// (peers) are left to their exec.Cmd.
func traceIoctls(t *testing.T, limit time.Duration, name string, args ...string) ([]ioctlShape, string) {
	t.Helper()
	runtime.LockOSThread() // every ptrace request must come from the tracer thread
	defer runtime.UnlockOSThread()
	out, err := os.CreateTemp(t.TempDir(), "trace-out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	inSyscall := map[int]bool{} // traced threads, and whether each is inside a syscall
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	pid := cmd.Process.Pid
	inSyscall[pid] = false
	// Reaped here, not by cmd.Wait: release the Process so that its pidfd
	// is closed now, not by a finalizer during a later test (which the
	// ownership tests would count as a leak); a tracee left running by a
	// failure is killed.
	defer func() {
		if len(inSyscall) > 0 {
			unix.Kill(pid, unix.SIGKILL)
		}
		cmd.Process.Release()
	}()
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
		t.Fatalf("%s: no exec stop: %v %v", name, ws, err)
	}
	if err := unix.PtraceSetOptions(pid, unix.PTRACE_O_TRACESYSGOOD|unix.PTRACE_O_TRACECLONE|unix.PTRACE_O_EXITKILL); err != nil {
		t.Fatal(err)
	}
	var (
		calls  []ioctlShape
		exitWS unix.WaitStatus // the process's, reported with its leader thread
		exited bool
	)
	if err := unix.PtraceSyscall(pid, 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(limit)
	for len(inSyscall) > 0 {
		if time.Now().After(deadline) {
			unix.Kill(pid, unix.SIGKILL)
			t.Fatalf("%s still running after %v", name, limit)
		}
		stopped := false
		for tid := range inSyscall {
			wpid, err := unix.Wait4(tid, &ws, unix.WALL|unix.WNOHANG, nil)
			if errors.Is(err, unix.ECHILD) {
				delete(inSyscall, tid)
				continue
			}
			if err != nil {
				t.Fatalf("wait %d: %v", tid, err)
			}
			if wpid != tid {
				continue
			}
			stopped = true
			if ws.Exited() || ws.Signaled() {
				if tid == pid {
					exitWS, exited = ws, true
				}
				delete(inSyscall, tid)
				continue
			}
			deliver := 0
			switch sig := ws.StopSignal(); {
			case sig == unix.SIGTRAP|0x80: // syscall entry or exit
				entering := !inSyscall[tid]
				inSyscall[tid] = entering
				if entering {
					if c, ok := peekIoctl(t, tid); ok {
						calls = append(calls, c)
					}
				}
			case sig == unix.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_CLONE:
				if msg, err := unix.PtraceGetEventMsg(tid); err == nil {
					inSyscall[int(msg)] = false
				}
			case sig == unix.SIGTRAP:
			case sig == unix.SIGSTOP: // a new thread's first stop
			default:
				deliver = int(sig)
			}
			unix.PtraceSyscall(tid, deliver)
		}
		if !stopped {
			time.Sleep(200 * time.Microsecond)
		}
	}
	b, _ := os.ReadFile(out.Name())
	if !exited || !exitWS.Exited() || exitWS.ExitStatus() != 0 {
		t.Fatalf("%s under the tracer: exit status %#x\n%s", name, uint32(exitWS), b)
	}
	return calls, string(b)
}

// peekIoctl decodes the RDMA_VERBS_IOCTL tid is entering, if it is one.
func peekIoctl(t *testing.T, tid int) (ioctlShape, bool) {
	var regs unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &regs); err != nil {
		if errors.Is(err, unix.ESRCH) {
			// Another thread's exit_group killed tid at its stop
			// (seen once in make test): it enters no more ioctls.
			return ioctlShape{}, false
		}
		t.Fatalf("getregs %d: %v", tid, err)
	}
	if regs.Orig_rax != unix.SYS_IOCTL || regs.Rsi != rdmaVerbsIoctl {
		return ioctlShape{}, false
	}
	hdr := make([]byte, 24)
	if _, err := unix.PtracePeekData(tid, uintptr(regs.Rdx), hdr); err != nil {
		t.Fatalf("peek ioctl header: %v", err)
	}
	le := binary.LittleEndian
	c := ioctlShape{Object: le.Uint16(hdr[2:]), Method: le.Uint16(hdr[4:])}
	attrs := make([]byte, 16*int(le.Uint16(hdr[6:])))
	if _, err := unix.PtracePeekData(tid, uintptr(regs.Rdx)+24, attrs); err != nil {
		t.Fatalf("peek ioctl attributes: %v", err)
	}
	for a := 0; a < len(attrs); a += 16 {
		c.Attrs = append(c.Attrs, attrShape{ID: le.Uint16(attrs[a:]), Len: le.Uint16(attrs[a+2:]), Flags: le.Uint16(attrs[a+4:])})
	}
	return c, true
}

// methodCalls returns the calls of one method.
func methodCalls(calls []ioctlShape, object, method uint16) []ioctlShape {
	var out []ioctlShape
	for _, c := range calls {
		if c.Object == object && c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// pureverbs creates a QP with the very command libibverbs 44 sends for
// ibv_rc_pingpong's QP: UVERBS_METHOD_QP_CREATE (object 4, method 0) with
// the same attributes in the same order, of the same lengths and flags,
// librxe's driver response included. Both sides are traced with ptrace,
// which decodes the command strace only shows as a pointer: this test binary
// running TestUverbsResources, and an ibv_rc_pingpong client.
func TestUverbsCreateQPIoctlLikeLibibverbs(t *testing.T) {
	devs := devices(t, 2)
	goCalls, goOut := traceIoctls(t, 60*time.Second, os.Args[0], "-test.run=^TestUverbsResources$", "-test.count=1")
	if !strings.Contains(goOut, "PASS") {
		t.Fatalf("TestUverbsResources under the tracer did not pass:\n%s", goOut)
	}
	args := []string{"-n", "1", "-p", "18702"}
	srv := startPeer(t, 60*time.Second, "ibv_rc_pingpong", append([]string{"-d", devs[0], "-g", gidArg(t, devs[0])}, args...)...)
	waitListening(t, srv, 18702, 30*time.Second)
	cCalls, _ := traceIoctls(t, 60*time.Second, "ibv_rc_pingpong", append(append([]string{"-d", devs[1], "-g", gidArg(t, devs[1])}, args...), "10.99.0.1")...)
	srv.wait(t)

	goQP, cQP := methodCalls(goCalls, 4, 0), methodCalls(cCalls, 4, 0)
	if len(goQP) == 0 || len(cQP) == 0 {
		t.Fatalf("create_qp ioctls: pureverbs %d, libibverbs %d; want both\npureverbs: %+v\nlibibverbs: %+v", len(goQP), len(cQP), goCalls, cCalls)
	}
	for _, c := range goQP {
		if !reflect.DeepEqual(c, cQP[0]) {
			t.Errorf("create_qp ioctl:\npureverbs  %+v\nlibibverbs %+v", c, cQP[0])
		}
	}
	t.Logf("create_qp ioctl of both: %+v (pureverbs sent it %d times, libibverbs %d)", cQP[0], len(goQP), len(cQP))
}
