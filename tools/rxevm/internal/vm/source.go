package vm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// ModulePath is the pureverbs module.
const ModulePath = "github.com/pureverbs/pureverbs"

// EnvSource names a pureverbs source tree to build the guest's programs
// from, instead of the one rxevm was built from.
const EnvSource = "RXEVM_SOURCE"

// Origin is the pureverbs module a binary was built with, from its build
// information: the main module (Main, inside the pureverbs repository) or
// a dependency at Version, possibly replaced.
type Origin struct {
	Main           bool
	Version        string
	Replace        string // replacement path ("" when none)
	ReplaceVersion string
}

// SelfOrigin reads the running binary's build information.
func SelfOrigin() (Origin, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Origin{}, errors.New("rxevm: the binary carries no build information")
	}
	return originOf(bi)
}

// originOf finds pureverbs in build information. `go tool` and `go install
// pkg@version` record the tool's own module as the main module, with its
// version and replacement; a build inside the repository records it as
// (devel) without either.
func originOf(bi *debug.BuildInfo) (Origin, error) {
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for i, d := range mods {
		if d.Path != ModulePath {
			continue
		}
		if i == 0 && d.Replace == nil && (d.Version == "" || d.Version == "(devel)") {
			return Origin{Main: true}, nil
		}
		o := Origin{Version: d.Version}
		if d.Replace != nil {
			o.Replace, o.ReplaceVersion = d.Replace.Path, d.Replace.Version
			if o.ReplaceVersion == "(devel)" { // a directory replacement
				o.ReplaceVersion = ""
			}
		}
		return o, nil
	}
	return Origin{}, fmt.Errorf("rxevm: built without %s in its build list (main module %s)", ModulePath, bi.Main.Path)
}

// listedModule is what `go list -m -json` prints of a module.
type listedModule struct {
	Path    string
	Version string
	Main    bool
	Dir     string
	Replace *listedModule
}

// matches reports whether the module the current directory resolves is
// the one o came from.
func (o Origin) matches(m listedModule) bool {
	if o.Main || m.Main {
		return o.Main && m.Main
	}
	if m.Version != o.Version {
		return false
	}
	if m.Replace == nil {
		return o.Replace == ""
	}
	return m.Replace.Path == o.Replace && m.Replace.Version == o.ReplaceVersion
}

// SourceDir returns a directory in which `go build` resolves pureverbs'
// packages to the version o names, so that the guest runs the code of the
// rxevm that boots it, not whatever the working directory holds:
//
//   - RXEVM_SOURCE, when set;
//   - the working directory, when its module resolves pureverbs to o
//     (inside the pureverbs repository, or a module that `go get -tool`s
//     rxevm: the go.mod the tool was built from);
//   - o's replacement directory, when it is an absolute path;
//   - otherwise o's version in the module cache (`go mod download`).
func SourceDir(o Origin) (string, error) {
	if dir := os.Getenv(EnvSource); dir != "" {
		return filepath.Abs(dir)
	}
	var m listedModule
	out, err := goCmd("", nil, "list", "-m", "-json", ModulePath)
	if err == nil && json.Unmarshal(out, &m) == nil && o.matches(m) {
		return os.Getwd()
	}
	switch {
	case o.Replace != "" && o.ReplaceVersion == "":
		if filepath.IsAbs(o.Replace) {
			return o.Replace, nil
		}
		return "", fmt.Errorf("rxevm: built with %s replaced by %s, relative to a module this directory is not in: run it from there or set %s",
			ModulePath, o.Replace, EnvSource)
	case o.Main:
		return "", fmt.Errorf("rxevm: built inside the pureverbs repository: run it from there or set %s", EnvSource)
	}
	mod, ver := ModulePath, o.Version
	if o.Replace != "" {
		mod, ver = o.Replace, o.ReplaceVersion
	}
	out, err = goCmd("", nil, "mod", "download", "-json", mod+"@"+ver)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("rxevm: go mod download %s@%s: no directory in %q", mod, ver, out)
	}
	return m.Dir, nil
}

// ModuleDir returns the directory of the pureverbs module that a build in
// src resolves: the repository inside it, or the read-only module cache copy
// an outside module requires. It asks the go command instead of walking up
// from src, which finds pureverbs only when src lies inside its tree.
func ModuleDir(src string) (string, error) {
	out, err := goCmd(src, nil, "list", "-m", "-f", "{{.Dir}}", ModulePath)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("rxevm: go list -m %s (in %s): no directory (not downloaded?)", ModulePath, src)
	}
	return dir, nil
}

// GuestPrograms are the static binaries of one run, built for the guest.
type GuestPrograms struct {
	Init  string            // rxevm itself, which is /init when it runs as PID 1
	Tools map[string]string // the other commands under pureverbs' tools/: name -> host file
}

// BuildGuest builds rxevm and every command under pureverbs' tools/ in
// src (see SourceDir) as static binaries for arch into out. Go's build
// cache makes repeat builds cheap.
func BuildGuest(src string, arch Arch, out string) (GuestPrograms, error) {
	env := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch.GOARCH}
	pattern := ModulePath + "/tools/..."
	list, err := goCmd(src, env, "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, pattern)
	if err != nil {
		return GuestPrograms{}, err
	}
	pkgs := strings.Fields(string(list))
	if len(pkgs) == 0 {
		return GuestPrograms{}, fmt.Errorf("rxevm: no commands match %s in %s", pattern, src)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return GuestPrograms{}, fmt.Errorf("rxevm: %w", err)
	}
	if _, err := goCmd(src, env, append([]string{"build", "-trimpath", "-o", out + "/"}, pkgs...)...); err != nil {
		return GuestPrograms{}, err
	}
	g := GuestPrograms{Tools: map[string]string{}}
	for _, p := range pkgs {
		name := filepath.Base(p)
		if name == "rxevm" {
			g.Init = filepath.Join(out, name)
		} else {
			g.Tools[name] = filepath.Join(out, name)
		}
	}
	if g.Init == "" {
		return GuestPrograms{}, fmt.Errorf("rxevm: %s in %s has no tools/rxevm", ModulePath, src)
	}
	if ok, err := IsStatic(g.Init); err != nil || !ok {
		return GuestPrograms{}, fmt.Errorf("rxevm: %s is not static (%v)", g.Init, err)
	}
	return g, nil
}

// goCmd runs the go command in dir with env added; the error carries its
// stderr.
func goCmd(dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		where := dir
		if where == "" {
			where = "."
		}
		return out, fmt.Errorf("rxevm: go %s (in %s): %w\n%s", strings.Join(args, " "), where, err, stderr.Bytes())
	}
	return out, nil
}
