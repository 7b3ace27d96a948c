//go:build integration

package integration

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Under `strace -f -y -xx -s 16`: a write() or RDMA_VERBS_IOCTL on a uverbs
// fd (-xx shows the fd's path in hex too); strace names the ioctl or, if it
// does not know it, shows its _IOC encoding.
var (
	uvFD         = `\d+<` + xxEscape("/dev/infiniband/uverbs") + `(?:\\x3[0-9])+>`
	uvWriteStart = regexp.MustCompile(`write\(` + uvFD + `, "((?:\\x[0-9a-f]{2}){4})`)
	uvIoctl      = regexp.MustCompile(`ioctl\(` + uvFD + `, (?:RDMA_VERBS_IOCTL|_IOC\(_IOC_READ\|_IOC_WRITE, 0x1b, 0x1, 0x18\))`)
)

// xxEscape is s as `strace -xx` prints it, quoted for a regexp.
func xxEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\\x%02x`, s[i])
	}
	return b.String()
}

// The verbs libibverbs 44 sends as ioctls on this kernel, by the write()
// command each replaces (IB_USER_VERBS_CMD_*).
var ioctlVerbs = map[uint32]string{0x04: "dealloc_pd", 0x0d: "dereg_mr", 0x12: "create_cq", 0x14: "destroy_cq", 0x18: "create_qp", 0x1b: "destroy_qp"}

// uvCommands returns the write() command numbers on uverbs fds in an
// strace, and how many RDMA_VERBS_IOCTL calls it shows.
func uvCommands(t *testing.T, out string) (writes map[uint32]int, ioctls int) {
	t.Helper()
	writes = map[uint32]int{}
	for _, m := range uvWriteStart.FindAllStringSubmatch(out, -1) {
		b, err := hex.DecodeString(strings.ReplaceAll(m[1], `\x`, ""))
		if err != nil {
			t.Fatal(err)
		}
		writes[binary.LittleEndian.Uint32(b)]++
	}
	return writes, len(uvIoctl.FindAllStringIndex(out, -1))
}

// checkIoctlVerbs fails if who sent any of ioctlVerbs as a write(), or if
// the trace misses uverbs traffic: the ioctls, and the write() command
// sanity that who is known to send.
func checkIoctlVerbs(t *testing.T, who, out string, sanity uint32) {
	t.Helper()
	writes, ioctls := uvCommands(t, out)
	if writes[sanity] == 0 || ioctls < len(ioctlVerbs) {
		t.Fatalf("%s: %d writes of command %#x and %d ioctls in the strace; want uverbs traffic:\n%s", who, writes[sanity], sanity, ioctls, out)
	}
	for cmd, verb := range ioctlVerbs {
		if n := writes[cmd]; n != 0 {
			t.Errorf("%s sent %s %d times as a write() command, not as an ioctl", who, verb, n)
		}
	}
	t.Logf("%s: %d uverbs ioctls, write() commands %v", who, ioctls, writes)
}

// On this kernel libibverbs creates CQs and QPs and destroys CQs, QPs, MRs and PDs
// through RDMA_VERBS_IOCTL, not write(); pureverbs does the same. The Go
// side is this test binary running TestUverbsResources (PD, MR, CQs, QP
// created and destroyed) under strace; any fallback to write() would show.
func TestUverbsVerbsUseIoctlLikeLibibverbs(t *testing.T) {
	devs := devices(t, 2)
	goOut := runPeer(t, 60*time.Second, "strace", "-f", "-y", "-xx", "-s", "16", "-e", "trace=write,ioctl",
		os.Args[0], "-test.run=^TestUverbsResources$", "-test.count=1")
	if !strings.Contains(goOut, "PASS") {
		t.Fatalf("TestUverbsResources under strace did not pass:\n%s", goOut)
	}
	checkIoctlVerbs(t, "pureverbs", goOut, 0x03) // alloc_pd is still a write() here

	args := []string{"-n", "1", "-p", "18701"}
	srv := startPeer(t, 60*time.Second, "strace", append([]string{"-f", "-y", "-xx", "-s", "16", "-e", "trace=write,ioctl",
		"ibv_rc_pingpong", "-d", devs[0], "-g", gidArg(t, devs[0])}, args...)...)
	waitListening(t, srv, 18701, 30*time.Second) // strace starts slowly in the VM
	runPeer(t, 60*time.Second, "ibv_rc_pingpong", append(append([]string{"-d", devs[1], "-g", gidArg(t, devs[1])}, args...), "10.99.0.1")...)
	// libibverbs 44 sends even its "write" commands through
	// UVERBS_METHOD_INVOKE_WRITE here; only librxe's doorbell is a write().
	checkIoctlVerbs(t, "libibverbs", srv.wait(t), 0x1c)
}
