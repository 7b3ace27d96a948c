//go:build linux

package netpoll

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// netpoll serves sockets without linking the RDMA stack: neither it nor
// anything it imports is one of the verbs packages. Completion queues come
// in through the CompletionQueue interface (netpoll/cqsource adapts cq's).
func TestNoRDMADependency(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		t.Skipf("no go tool to list dependencies with: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/pureverbs/pureverbs/netpoll").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, rdma := range []string{"/uverbs", "/rxe", "/cq", "/qp"} {
			if strings.HasPrefix(pkg, "github.com/pureverbs/pureverbs") && strings.Contains(pkg+"/", rdma+"/") {
				t.Errorf("netpoll depends on %s", pkg)
			}
		}
	}
}
