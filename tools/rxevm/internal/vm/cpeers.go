package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CPeerDir holds pureverbs' own C peers in its source tree: programs written
// against librdmacm and libibverbs alone, for interop tests that need a C
// program no Debian package ships (e.g. a SEND_WITH_IMM frame sender). A
// source named libNAME.c is a shared object instead, for LD_PRELOAD into
// Debian's C tools (e.g. to give them the Go tools' completion wait).
const CPeerDir = "integration/testdata/cpeer"

// cPeerDevPackages carry the headers the C peers compile against. They come
// from the machine's own lists for every guest architecture: the headers
// are the same on each.
var cPeerDevPackages = []string{"librdmacm-dev", "libibverbs-dev"}

// CPeers compiles every NAME.c in CPeerDir of the pureverbs module that src
// (see SourceDir) builds with, for the cache's guest architecture, and
// returns NAME -> binary, for the guest's /usr/local/bin. Only pureverbs'
// own tests run them: rxevm builds them for those, or on demand.
// They link dynamically against the librdmacm and libibverbs unpacked in
// peers (see Peers), which the image carries anyway, so they run on the
// guest's own rdma-core. gcc (a cross gcc for a foreign architecture) is
// installed with apt-get when missing, the headers are unpacked into the
// cache once, and each binary is kept in the cache under a hash of its
// source and compiler: a rebuild happens only when the source changes.
func (c *Cache) CPeers(src, peers string) (map[string]string, error) {
	root, err := ModuleDir(src)
	if err != nil {
		return nil, err
	}
	sources, err := filepath.Glob(filepath.Join(root, CPeerDir, "*.c"))
	if err != nil || len(sources) == 0 {
		return nil, err // an older pureverbs: none to build
	}
	a := c.arch()
	cc, pkgs := "gcc", []string{"gcc", "libc6-dev"}
	if a.Foreign() {
		cc, pkgs = a.Triple+"-gcc", []string{"gcc-" + a.Triple, "libc6-dev-" + a.Deb + "-cross"}
	}
	if err := c.ensureCompiler(cc, pkgs); err != nil {
		return nil, err
	}
	unlock, err := c.Lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	dev := filepath.Join(c.Dir, "cpeer-dev")
	if err := c.unpack(dev, nil, cPeerDevPackages, nil); err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, s := range sources {
		name := strings.TrimSuffix(filepath.Base(s), ".c")
		bin, err := c.buildCPeer(cc, a, s, filepath.Join(dev, "usr", "include"), peers)
		if err != nil {
			return nil, err
		}
		bins[name] = bin
	}
	return bins, nil
}

// buildCPeer compiles one C peer unless the cache holds it already. The
// caller holds the lock.
func (c *Cache) buildCPeer(cc string, a Arch, source, include, peers string) (string, error) {
	code, err := os.ReadFile(source)
	if err != nil {
		return "", fmt.Errorf("rxevm: C peer: %w", err)
	}
	libs := filepath.Join(peers, "usr", "lib", a.Triple)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", cc, a.GOARCH, libs)
	h.Write(code)
	name := strings.TrimSuffix(filepath.Base(source), ".c")
	dir := filepath.Join(c.Dir, "cpeers", a.GOARCH)
	bin := filepath.Join(dir, name+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("rxevm: C peer: %w", err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	defer os.Remove(tmp)
	// The libraries may come from a newer release than the host's C
	// library (trixie's peers on a bookworm host) and use its symbols:
	// they are resolved in the guest, against the C library unpacked with
	// them, so the link leaves them to it.
	args := []string{"-O2", "-Wall", "-I", include, "-o", tmp, source,
		"-L", libs, "-l:librdmacm.so.1", "-l:libibverbs.so.1",
		"-Wl,-rpath-link," + libs + ":" + filepath.Join(peers, "lib", a.Triple),
		"-Wl,--allow-shlib-undefined"}
	if strings.HasPrefix(name, "lib") {
		args = append(args, "-shared", "-fPIC")
	}
	if c.Log != nil {
		fmt.Fprintf(c.Log, "rxevm: compiling C peer %s for %s\n", name, a.GOARCH)
	}
	if _, err := c.run("", cc, args...); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("rxevm: C peer: %w", err)
	}
	return bin, nil
}
