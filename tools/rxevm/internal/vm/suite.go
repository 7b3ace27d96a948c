package vm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultSuite is the Debian suite of the machine's own apt lists: its
// kernel boots unless RXEVM_SUITE names another.
const DefaultSuite = "bookworm"

// machineSources are where apt reads the machine's own sources (apt ignores
// other names in sources.list.d, and so do we).
var machineSources = []string{"/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources"}

// aptOptions returns the options that point apt-get and apt-cache at the
// state for the cache's suite and architecture: none for DefaultSuite on
// the host's architecture (the machine's own), otherwise sources, lists,
// archives and preferences under apt/<suite> (apt/<suite>-<arch> for a
// foreign architecture) in the cache, so fetching another release's or
// architecture's kernel leaves the machine's apt lists as they were.
func (c *Cache) aptOptions() ([]string, error) {
	if err := checkSuite(c.Suite); err != nil {
		return nil, err
	}
	suite := c.Suite
	if suite == "" {
		suite = DefaultSuite
	}
	foreign := c.Arch.GOARCH != "" && c.Arch.Foreign()
	if suite == DefaultSuite && !foreign {
		return nil, nil
	}
	entry, err := machineSuiteSource(DefaultSuite, suite)
	if err != nil {
		return nil, err
	}
	name := suite
	if foreign {
		name += "-" + c.Arch.Deb
	}
	dir := filepath.Join(c.Dir, "apt", name)
	parts := filepath.Join(dir, "sources.list.d")
	for _, d := range []string{parts, filepath.Join(dir, "lists", "partial"), filepath.Join(dir, "cache", "archives", "partial")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	src := filepath.Join(parts, suite+".sources")
	if old, err := os.ReadFile(src); err != nil || !bytes.Equal(old, []byte(entry)) {
		if err := writeFileAtomic(src, []byte(entry)); err != nil {
			return nil, err
		}
	}
	opts := []string{
		"-oDir::Etc::SourceList=/dev/null",
		"-oDir::Etc::SourceParts=" + parts,
		"-oDir::Etc::Preferences=/dev/null",
		"-oDir::Etc::PreferencesParts=/dev/null",
		"-oDir::State::Lists=" + filepath.Join(dir, "lists"),
		"-oDir::Cache=" + filepath.Join(dir, "cache"),
	}
	if foreign {
		opts = append(opts, "-oAPT::Architecture="+c.Arch.Deb, "-oAPT::Architectures="+c.Arch.Deb)
	}
	return opts, nil
}

// checkSuite refuses a suite that is not a Debian suite name, checked as
// a package name is (lower-case letters, digits, '+', '-', '.', starting
// with a letter or digit: bookworm, trixie-backports): the name goes into a
// generated sources entry, where a newline would add a field such as
// "Trusted: yes", and into paths in the cache, where "../" would move apt's
// state out of it. "" is the default suite.
func checkSuite(s string) error {
	if s == "" || validPackageName(s) {
		return nil
	}
	return fmt.Errorf("rxevm: %s=%q is not a Debian suite name (lower-case letters, digits, '+', '-', '.')", EnvSuite, s)
}

// machineSuiteSource reads the machine's apt sources and returns sources
// entries for suite to on the mirror that serves suite from, followed by
// to-updates and to-security where the machine has from-updates and
// from-security (the current kernel package is often a security update).
func machineSuiteSource(from, to string) (string, error) {
	var entries []string
	for i, suffix := range []string{"", "-updates", "-security"} {
		e, ok := machineEntry(from+suffix, to+suffix)
		if !ok {
			if i == 0 {
				return "", fmt.Errorf("rxevm: no apt source for %s with component main in %s, to take the mirror for %s from",
					from, strings.Join(machineSources, " "), to)
			}
			continue
		}
		entries = append(entries, e)
	}
	return strings.Join(entries, "\n"), nil
}

// machineEntry is suiteSource over the machine's source files.
func machineEntry(from, to string) (string, bool) {
	for _, pattern := range machineSources {
		names, _ := filepath.Glob(pattern)
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				continue
			}
			if e, ok := suiteSource(name, string(b), from, to); ok {
				return e, true
			}
		}
	}
	return "", false
}

// suiteSource finds the first "deb" entry of an apt sources file (one-line
// format, or deb822 when name ends in .sources) that serves suite from with
// component main, and returns a deb822 entry for suite to from the same
// mirror and keyring. Only the Packages indexes are fetched: the kernel's
// name and its .deb are all the harness wants.
func suiteSource(name, text, from, to string) (string, bool) {
	parse := oneLineSources
	if strings.HasSuffix(name, ".sources") {
		parse = deb822Sources
	}
	for _, s := range parse(text) {
		if !slices.Contains(s.suites, from) || !slices.Contains(s.components, "main") {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Types: deb\nURIs: %s\nSuites: %s\nComponents: main\n", s.uri, to)
		switch {
		case strings.HasPrefix(s.signedBy, "\n"): // an inline key, on continuation lines
			fmt.Fprintf(&b, "Signed-By:%s\n", s.signedBy)
		case s.signedBy != "":
			fmt.Fprintf(&b, "Signed-By: %s\n", s.signedBy)
		}
		b.WriteString("Targets: Packages\n")
		return b.String(), true
	}
	return "", false
}

// debSource is what suiteSource needs of one "deb" entry.
type debSource struct {
	uri        string
	suites     []string
	components []string
	signedBy   string // a keyring path or fingerprints; an inline key keeps its continuation lines
}

// oneLineSources parses "deb [opt=value ...] uri suite component..." lines.
func oneLineSources(text string) []debSource {
	var out []debSource
	for _, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		var s debSource
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			f[0] = strings.TrimPrefix(f[0], "[")
			for len(f) > 0 {
				opt, last := strings.CutSuffix(f[0], "]")
				if k, v, ok := strings.Cut(opt, "="); ok && k == "signed-by" {
					s.signedBy = v
				}
				f = f[1:]
				if last {
					break
				}
			}
		}
		if len(f) < 3 {
			continue
		}
		s.uri, s.suites, s.components = f[0], f[1:2], f[2:]
		out = append(out, s)
	}
	return out
}

// deb822Sources parses the stanzas of a .sources file; field names are
// case-insensitive and an entry with "Enabled: no" is skipped.
func deb822Sources(text string) []debSource {
	var out []debSource
	fields := map[string]string{}
	var key string
	flush := func() {
		uris := strings.Fields(fields["uris"])
		enabled := strings.ToLower(fields["enabled"])
		if slices.Contains(strings.Fields(fields["types"]), "deb") && len(uris) > 0 && enabled != "no" && enabled != "false" {
			out = append(out, debSource{
				uri:        uris[0],
				suites:     strings.Fields(fields["suites"]),
				components: strings.Fields(fields["components"]),
				signedBy:   fields["signed-by"],
			})
		}
		fields, key = map[string]string{}, ""
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			if key != "" {
				fields[key] += "\n" + line
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			key = strings.ToLower(strings.TrimSpace(k))
			fields[key] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}
