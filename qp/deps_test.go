//go:build linux

package qp

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The verbs packages link no netlink library: a program that only posts
// work requests carries none of it (the kernel's device index, the one
// thing asked of RDMA netlink, is rxelink.DeviceIndex's).
func TestNoNetlinkDependency(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		t.Skipf("no go tool to list dependencies with: %v", err)
	}
	const mod = "github.com/pureverbs/pureverbs/"
	out, err := exec.Command(goTool, "list", "-deps", mod+"qp", mod+"cq", mod+"uverbs", mod+"rxe").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "netlink") {
			t.Errorf("the verbs packages depend on %s", pkg)
		}
	}
}
