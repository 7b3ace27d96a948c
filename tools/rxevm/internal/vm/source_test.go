package vm

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOriginOfBuildInfo(t *testing.T) {
	pv := func(version string, replace *debug.Module) debug.Module {
		return debug.Module{Path: ModulePath, Version: version, Replace: replace}
	}
	other := debug.Module{Path: "example.com/app", Version: "(devel)"}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want Origin
	}{
		// make's rxevm-host, go run ./tools/rxevm in the repository.
		{"repository", debug.BuildInfo{Main: pv("(devel)", nil)}, Origin{Main: true}},
		// go tool rxevm in a module with replace => ../.. (as go version -m shows it).
		{"go tool, directory replace", debug.BuildInfo{Main: pv("v0.0.0-00010101000000-000000000000",
			&debug.Module{Path: "../..", Version: "(devel)"})},
			Origin{Version: "v0.0.0-00010101000000-000000000000", Replace: "../.."}},
		// go tool rxevm in a module requiring a release.
		{"go tool, release", debug.BuildInfo{Main: pv("v0.3.0", nil)}, Origin{Version: "v0.3.0"}},
		// rxevm linked into another program.
		{"dependency", debug.BuildInfo{Main: other, Deps: []*debug.Module{
			{Path: "golang.org/x/sys", Version: "v0.50.0"},
			{Path: ModulePath, Version: "v0.3.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.3.1"}}}},
			Origin{Version: "v0.3.0", Replace: "example.com/fork", ReplaceVersion: "v0.3.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := originOf(&tc.bi)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("origin (-want +got):\n%s", d)
			}
		})
	}
	if _, err := originOf(&debug.BuildInfo{Main: other}); err == nil {
		t.Error("build information without pureverbs was accepted")
	}
}

func TestOriginMatchesListedModule(t *testing.T) {
	repl := &listedModule{Path: "../.."}
	for _, tc := range []struct {
		name string
		o    Origin
		m    listedModule
		want bool
	}{
		{"repository", Origin{Main: true}, listedModule{Path: ModulePath, Main: true}, true},
		{"repository binary, other module", Origin{Main: true}, listedModule{Path: ModulePath, Version: "v0.3.0"}, false},
		{"same replace", Origin{Version: "v0.0.0", Replace: "../.."}, listedModule{Version: "v0.0.0", Replace: repl}, true},
		{"replace elsewhere", Origin{Version: "v0.0.0", Replace: "../pv"}, listedModule{Version: "v0.0.0", Replace: repl}, false},
		{"replaced here only", Origin{Version: "v0.0.0"}, listedModule{Version: "v0.0.0", Replace: repl}, false},
		{"same release", Origin{Version: "v0.3.0"}, listedModule{Version: "v0.3.0"}, true},
		{"other release", Origin{Version: "v0.3.0"}, listedModule{Version: "v0.4.0"}, false},
		{"release vs the repository", Origin{Version: "v0.3.0"}, listedModule{Main: true}, false},
	} {
		if got := tc.o.matches(tc.m); got != tc.want {
			t.Errorf("%s: matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}
