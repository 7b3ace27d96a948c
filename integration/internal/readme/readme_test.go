// Package readme tests the repository's README.md: every Go block in it
// compiles against the module as it is, and the commands other checks
// extract from it are where they look for them.
package readme

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmePath is README.md at the module root, from this package's directory.
const readmePath = "../../../README.md"

// block is one fenced code block of a Markdown file.
type block struct {
	lang string
	line int // of the opening fence, 1-based
	text string
}

// fences returns doc's fenced code blocks in order; an unclosed fence is an
// error.
func fences(doc string) ([]block, error) {
	var (
		out  []block
		cur  *block
		body strings.Builder
	)
	for i, l := range strings.Split(doc, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: i + 1}
			body.Reset()
		case cur != nil && strings.TrimSpace(l) == "```":
			cur.text = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(l + "\n")
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("the block opened at line %d is not closed", cur.line)
	}
	return out, nil
}

var packageClause = regexp.MustCompile(`(?m)^package (\w+)$`)

// TestGoBlocksCompile writes every ```go block of README.md as a package
// of its own inside the module (under testdata, which ./... leaves out)
// and vets it, which type-checks it against the module's current code: a
// README whose example drifts from the API fails here. Each block is a
// whole file: `package main` builds a program, any other package is taken
// as a test file.
func TestGoBlocksCompile(t *testing.T) {
	doc, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := fences(string(doc))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	n := 0
	for _, b := range blocks {
		if b.lang != "go" {
			continue
		}
		n++
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			m := packageClause.FindStringSubmatch(b.text)
			if m == nil {
				t.Fatalf("README.md:%d: the Go block is not a whole file (no package clause)", b.line)
			}
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			dir, err := os.MkdirTemp("testdata", "block-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				os.RemoveAll(dir)
				os.Remove("testdata") // when no other block is in it
			})
			name := "block_test.go"
			if m[1] == "main" {
				name = "main.go"
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("go", "vet", "./"+dir)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("README.md:%d: the Go block does not compile (go vet: %v):\n%s", b.line, err, renumber(out, dir, b.line))
			}
		})
	}
	if n < 2 {
		t.Errorf("README.md has %d Go blocks; want the RC and the rsocket examples at least", n)
	}
}

// renumber points the compiler's positions in dir's file at README.md's
// lines (the block's first line is the one after its fence).
func renumber(out []byte, dir string, fence int) []byte {
	re := regexp.MustCompile(`\S*` + regexp.QuoteMeta(filepath.Base(dir)) + `/\w+\.go:(\d+)`)
	return re.ReplaceAllFunc(out, func(m []byte) []byte {
		var l int
		fmt.Sscan(string(re.FindSubmatch(m)[1]), &l)
		return []byte(fmt.Sprintf("README.md:%d", fence+l))
	})
}

// The commands .ci/outside-module runs, as a user would type them: the
// first ```sh block under "## Testing your own module" holds exactly these
// two lines, and a later one the arm64 variant.
func TestOwnModuleCommands(t *testing.T) {
	doc, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := bytes.Cut(doc, []byte("\n## Testing your own module\n"))
	if !ok {
		t.Fatal(`README.md has no "## Testing your own module" section`)
	}
	if next := bytes.Index(section, []byte("\n## ")); next >= 0 {
		section = section[:next]
	}
	blocks, err := fences(string(section))
	if err != nil {
		t.Fatal(err)
	}
	want := "go get -tool github.com/pureverbs/pureverbs/tools/rxevm@latest\n" +
		"CGO_ENABLED=0 go test -exec 'go tool rxevm exec' ./...\n"
	if len(blocks) == 0 || blocks[0].lang != "sh" || blocks[0].text != want {
		t.Errorf("the section's first block is not the sh block\n%s", want)
	}
	// The arm64 variant: a line of an sh block of its own, which CI runs
	// with the module's tests built for arm64.
	arm64 := "GOARCH=arm64 CGO_ENABLED=0 go test -exec 'env -u GOARCH go tool rxevm exec' ./...\n"
	found := false
	for _, b := range blocks[1:] {
		found = found || b.lang == "sh" && b.text == arm64
	}
	if !found {
		t.Errorf("the section has no sh block of its own with\n%s", arm64)
	}
}

// The README stays a front door.
func TestLength(t *testing.T) {
	doc, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(doc, []byte("\n")); n > 200 {
		t.Errorf("README.md has %d lines; the front door is at most 200 (reference goes in the tools' and integration's READMEs and the package docs)", n)
	}
}

// Every relative link of README.md names a file of the repository.
func TestLinks(t *testing.T) {
	doc, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\(([^)#]+)\)`).FindAllSubmatch(doc, -1)
	for _, m := range links {
		target := string(m[1])
		if strings.Contains(target, "://") {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(readmePath), target)); err != nil {
			t.Errorf("README.md links to %s: %v", target, err)
		}
	}
	if len(links) == 0 {
		t.Error("README.md has no links to the tools' and integration's READMEs")
	}
}
