package vm

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// trixieEntry is what suiteSource writes for the mirror of debian12Sources.
const trixieEntry = `Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
Targets: Packages
`

// debian12Sources is the debian.sources a Debian 12 image ships (with a
// snapshot comment), the security suite first to show it is not taken.
const debian12Sources = `Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`

func TestSuiteSource(t *testing.T) {
	for _, tc := range []struct {
		name, file, text string
		want             string // "" when no entry serves bookworm main
	}{
		{"deb822", "debian.sources", debian12Sources, trixieEntry},
		{"deb822 case and continuation", "mirror.sources", `types: deb-src deb
uris: http://mirror.example/debian
  http://other.example/debian
suites: bookworm
components: contrib
  main
signed-by: /usr/share/keyrings/debian-archive-keyring.gpg
`, strings.Replace(trixieEntry, "deb.debian.org", "mirror.example", 1)},
		{"deb822 disabled and deb-src only", "x.sources", `Types: deb
URIs: http://off.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main
`, ""},
		{"deb822 inline key", "key.sources", `Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mDMEZ...
 -----END PGP PUBLIC KEY BLOCK-----
`, `Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mDMEZ...
 -----END PGP PUBLIC KEY BLOCK-----
Targets: Packages
`},
		{"one-line", "sources.list", `# deb cdrom:[Debian GNU/Linux 12]/ bookworm main
deb-src http://src.example/debian bookworm main
deb http://deb.debian.org/debian-security bookworm-security main
deb http://deb.debian.org/debian bookworm main contrib # the release
`, strings.Replace(trixieEntry, "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n", "", 1)},
		{"one-line options", "mirror.list", `deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
`, trixieEntry},
		{"one-line spaced options", "mirror.list", `deb [ signed-by=/usr/share/keyrings/debian-archive-keyring.gpg arch=amd64 ] http://deb.debian.org/debian bookworm main
`, trixieEntry},
		{"one-line no main", "contrib.list", "deb http://deb.debian.org/debian bookworm contrib\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := suiteSource(tc.file, tc.text, "bookworm", "trixie")
			if ok != (tc.want != "") {
				t.Fatalf("found = %v, want %v (entry %q)", ok, tc.want != "", got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAptOptionsKeepMachineState(t *testing.T) {
	etc := t.TempDir()
	src := filepath.Join(etc, "debian.sources")
	if err := os.WriteFile(src, []byte(debian12Sources), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := machineSources
	machineSources = []string{filepath.Join(etc, "*.list"), filepath.Join(etc, "*.sources")}
	t.Cleanup(func() { machineSources = saved })

	for _, suite := range []string{"", DefaultSuite} {
		if opts, err := (&Cache{Dir: t.TempDir(), Suite: suite}).aptOptions(); err != nil || opts != nil {
			t.Errorf("suite %q: options %q, %v; want the machine's own apt state", suite, opts, err)
		}
	}

	c := &Cache{Dir: t.TempDir(), Suite: "trixie"}
	opts, err := c.aptOptions()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.Dir, "apt", "trixie")
	want := []string{
		"-oDir::Etc::SourceList=/dev/null",
		"-oDir::Etc::SourceParts=" + filepath.Join(dir, "sources.list.d"),
		"-oDir::Etc::Preferences=/dev/null",
		"-oDir::Etc::PreferencesParts=/dev/null",
		"-oDir::State::Lists=" + filepath.Join(dir, "lists"),
		"-oDir::Cache=" + filepath.Join(dir, "cache"),
	}
	if diff := cmp.Diff(want, opts); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sources.list.d", "trixie.sources"))
	if err != nil {
		t.Fatal(err)
	}
	want3 := trixieEntry + "\n" + strings.Replace(trixieEntry, "trixie", "trixie-updates", 1) + "\n" +
		strings.Replace(strings.Replace(trixieEntry, "trixie", "trixie-security", 1), "debian\n", "debian-security\n", 1)
	if diff := cmp.Diff(want3, string(b)); diff != "" {
		t.Errorf("trixie.sources (-want +got):\n%s", diff)
	}
	for _, d := range []string{"lists/partial", "cache/archives/partial"} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: not made (%v)", d, err)
		}
	}

	// A foreign architecture gets a state of its own even for the machine's suite.
	arm := &Cache{Dir: t.TempDir(), Arch: ARM64}
	opts, err = arm.aptOptions()
	if err != nil {
		t.Fatal(err)
	}
	adir := filepath.Join(arm.Dir, "apt", "bookworm-arm64")
	if diff := cmp.Diff([]string{
		"-oDir::Etc::SourceList=/dev/null",
		"-oDir::Etc::SourceParts=" + filepath.Join(adir, "sources.list.d"),
		"-oDir::Etc::Preferences=/dev/null",
		"-oDir::Etc::PreferencesParts=/dev/null",
		"-oDir::State::Lists=" + filepath.Join(adir, "lists"),
		"-oDir::Cache=" + filepath.Join(adir, "cache"),
		"-oAPT::Architecture=arm64", "-oAPT::Architectures=arm64",
	}, opts); diff != "" {
		t.Errorf("arm64 options (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(filepath.Join(adir, "sources.list.d", "bookworm.sources")); err != nil ||
		!strings.Contains(string(b), "Suites: bookworm-security\n") || !strings.Contains(string(b), "Suites: bookworm\n") {
		t.Errorf("arm64 sources lack the release or its security suite: %q, %v", b, err)
	}

	machineSources = []string{filepath.Join(etc, "*.list")}
	if _, err := (&Cache{Dir: t.TempDir(), Suite: "trixie"}).aptOptions(); err == nil {
		t.Error("no bookworm source on the machine: want an error")
	}
}

// RXEVM_SUITE reaches a generated sources entry and paths in the cache: a
// newline (which added "Trusted: yes" to the entry) and "../" (which moved
// apt's state out of the cache) are refused with a message naming the
// variable, before anything is written; suite names as Debian spells them
// pass.
func TestSuiteNameChecked(t *testing.T) {
	etc := t.TempDir()
	if err := os.WriteFile(filepath.Join(etc, "debian.sources"), []byte(debian12Sources), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := machineSources
	machineSources = []string{filepath.Join(etc, "*.sources")}
	t.Cleanup(func() { machineSources = saved })
	t.Setenv(EnvCache, t.TempDir())

	for _, bad := range []string{"trixie\nTrusted: yes", "../../outside", "trixie/../..", "Trixie", "-o", "t"} {
		c := &Cache{Dir: t.TempDir(), Suite: bad}
		if _, err := c.aptOptions(); err == nil || !strings.Contains(err.Error(), EnvSuite) {
			t.Errorf("suite %q: aptOptions error %v; want one naming %s", bad, err, EnvSuite)
		}
		if _, err := os.Stat(filepath.Join(c.Dir, "apt")); !os.IsNotExist(err) {
			t.Errorf("suite %q: apt state written (%v)", bad, err)
		}
		t.Setenv(EnvSuite, bad)
		if _, err := DefaultCache(AMD64, io.Discard); err == nil {
			t.Errorf("RXEVM_SUITE=%q accepted", bad)
		}
	}
	for _, good := range []string{"", "trixie", "bookworm-backports", "sid"} {
		t.Setenv(EnvSuite, good)
		if _, err := DefaultCache(AMD64, io.Discard); err != nil {
			t.Errorf("RXEVM_SUITE=%q: %v", good, err)
		}
		if _, err := (&Cache{Dir: t.TempDir(), Suite: good}).aptOptions(); err != nil {
			t.Errorf("suite %q: aptOptions: %v", good, err)
		}
	}
}
