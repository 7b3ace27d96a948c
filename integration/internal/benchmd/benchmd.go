// Package benchmd carries the measured tables of the VM benchmarks from the
// guest into the tools' READMEs. A bench test prints its Markdown table as a
// section: the table between two HTML comment markers, `<!-- bench:NAME
// begin -->` and `<!-- bench:NAME end -->`, headed by where it was measured
// (commit, kernel, mode, date). The make target pipes the run's output
// through the splice command, which replaces what stands between the same
// markers in a README with the section. So a table in a README is always
// one a bench run printed, never one typed by hand.
package benchmd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Meta says where a table was measured.
type Meta struct {
	Commit string // the pureverbs commit the run was built from
	Kernel string // the guest's kernel release (uname -r)
	Mode   string // how the guest ran: "TCG, amd64, 2 vCPUs", ...
	Date   string // the day of the run, UTC, YYYY-MM-DD
}

// Section is the Markdown a bench test prints for one table: the begin
// marker, a line of meta, the table, the end marker, each on lines of
// their own. name is the marker's name (letters, digits, '-' and '_').
func Section(name string, m Meta, table string) (string, error) {
	if !validName.MatchString(name) {
		return "", fmt.Errorf("benchmd: section name %q: want letters, digits, '-' or '_'", name)
	}
	if strings.Contains(table, "<!-- bench:") {
		return "", fmt.Errorf("benchmd: section %s: the table holds a marker", name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nMeasured on commit %s, kernel %s, %s, %s.\n\n", begin(name), orUnknown(m.Commit), orUnknown(m.Kernel), orUnknown(m.Mode), orUnknown(m.Date))
	b.WriteString(strings.TrimRight(table, "\n"))
	fmt.Fprintf(&b, "\n%s\n", end(name))
	return b.String(), nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

var (
	validName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	markerRE  = regexp.MustCompile(`^<!-- bench:([A-Za-z0-9_-]+) (begin|end) -->$`)
)

func begin(name string) string { return "<!-- bench:" + name + " begin -->" }
func end(name string) string   { return "<!-- bench:" + name + " end -->" }

// maxSection bounds one section's size, so that output without an end
// marker cannot grow without limit.
const maxSection = 1 << 20

// Extract reads a run's output and returns its sections by name, each from
// its begin marker through its end marker. Other lines are ignored; a
// carriage return before a newline (a serial console's) is dropped. A
// section printed twice (the test ran twice) keeps the last. A begin
// without its end, an end without its begin, or a begin inside another
// section is an error.
func Extract(r io.Reader) (map[string]string, error) {
	sections := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxSection)
	var (
		open string
		cur  strings.Builder
	)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text() // without its newline, and a carriage return before it
		m := markerRE.FindStringSubmatch(strings.TrimSpace(line))
		switch {
		case m == nil:
			if open != "" {
				if cur.Len()+len(line) > maxSection {
					return nil, fmt.Errorf("benchmd: section %s: longer than %d bytes", open, maxSection)
				}
				cur.WriteString(line + "\n")
			}
		case m[2] == "begin":
			if open != "" {
				return nil, fmt.Errorf("benchmd: line %d: section %s begins inside section %s", n, m[1], open)
			}
			open = m[1]
			cur.Reset()
			cur.WriteString(begin(open) + "\n")
		default:
			if open != m[1] {
				return nil, fmt.Errorf("benchmd: line %d: end of section %s, which has not begun", n, m[1])
			}
			cur.WriteString(end(open) + "\n")
			sections[open] = cur.String()
			open = ""
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchmd: reading the output: %w", err)
	}
	if open != "" {
		return nil, fmt.Errorf("benchmd: section %s has no end marker", open)
	}
	return sections, nil
}

// ErrNoMarkers is returned by Splice for a document without name's
// markers.
var ErrNoMarkers = errors.New("benchmd: no markers")

// Splice returns doc with the lines from name's begin marker through its
// end marker replaced by section (as Section or Extract made it). The
// markers must stand on lines of their own, once each, begin before end.
func Splice(doc []byte, name, section string) ([]byte, error) {
	lines := bytes.SplitAfter(doc, []byte("\n"))
	first, last := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(string(l)) {
		case begin(name):
			if first >= 0 {
				return nil, fmt.Errorf("benchmd: section %s begins twice (lines %d and %d)", name, first+1, i+1)
			}
			first = i
		case end(name):
			if last >= 0 {
				return nil, fmt.Errorf("benchmd: section %s ends twice (lines %d and %d)", name, last+1, i+1)
			}
			last = i
		}
	}
	switch {
	case first < 0 && last < 0:
		return nil, fmt.Errorf("%w for section %s", ErrNoMarkers, name)
	case first < 0 || last < 0 || last < first:
		return nil, fmt.Errorf("benchmd: section %s: begin and end markers missing or out of order", name)
	}
	var out bytes.Buffer
	for _, l := range lines[:first] {
		out.Write(l)
	}
	out.WriteString(section)
	if !strings.HasSuffix(section, "\n") {
		out.WriteByte('\n')
	}
	for _, l := range lines[last+1:] {
		out.Write(l)
	}
	return out.Bytes(), nil
}
