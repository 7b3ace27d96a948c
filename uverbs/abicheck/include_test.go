package abicheck

import (
	"os"
	"path/filepath"
	"testing"
)

// In a checkout where make unit ran, the headers `rxevm uapi` unpacked
// into the module's own cache (.cache/rxevm, the Makefile's default) are
// found from any package directory without PUREVERBS_UAPI_INCLUDE, so that
// a plain go test ./... checks the pins against them.
func TestIncludeDirFindsModuleCache(t *testing.T) {
	root := t.TempDir()
	write := func(rel string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod")
	write(".cache/rxevm/uapi/trixie/usr/include/rdma/ib_user_verbs.h")
	write("uverbs/abicheck/x.go")
	t.Setenv(EnvInclude, "")
	t.Setenv("RXEVM_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // a user cache without headers
	t.Chdir(filepath.Join(root, "uverbs", "abicheck"))
	want := filepath.Join(root, ".cache", "rxevm", "uapi", "trixie", "usr", "include")
	if got := includeDir(); got != want {
		t.Errorf("includeDir() = %q, want the module cache's %q", got, want)
	}
	t.Setenv(EnvInclude, "/elsewhere")
	if got := includeDir(); got != "/elsewhere" {
		t.Errorf("with %s set, includeDir() = %q", EnvInclude, got)
	}
}
