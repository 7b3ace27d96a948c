//go:build integration

package integration

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/integration/internal/benchmd"
)

// benchMarkdown prints a bench's Markdown table as section name (package
// benchmd: between <!-- bench:name begin --> and end markers, headed by
// commit, kernel, mode and date) when RXEVM_BENCH_MARKDOWN=1 asks; the make
// bench targets set it and splice the section into the tool's README. The
// commit comes from the host in RXEVM_BENCH_COMMIT: the guest has no git.
func benchMarkdown(name, table string) error { return writeBenchMarkdown(os.Stdout, name, table) }

func writeBenchMarkdown(w io.Writer, name, table string) error {
	if os.Getenv("RXEVM_BENCH_MARKDOWN") != "1" {
		return nil
	}
	var uts unix.Utsname
	kernel := ""
	if err := unix.Uname(&uts); err == nil {
		kernel = unix.ByteSliceToString(uts.Release[:])
	}
	sec, err := benchmd.Section(name, benchmd.Meta{
		Commit: os.Getenv("RXEVM_BENCH_COMMIT"),
		Kernel: kernel,
		Mode:   benchMode(),
		Date:   time.Now().UTC().Format(time.DateOnly),
	}, table)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, sec)
	return err
}

// benchMode says how the measuring machine ran: in rxevm's VM (RXEVM=1)
// under TCG or KVM, or on the host itself (make test-host).
func benchMode() string {
	where := "host, no VM"
	if os.Getenv("RXEVM") == "1" {
		where = "QEMU TCG"
		if os.Getenv("RXEVM_KVM") == "1" {
			where = "QEMU KVM"
		}
	}
	return fmt.Sprintf("%s, %s, %d CPUs", where, runtime.GOARCH, runtime.NumCPU())
}

// The section a bench prints comes back out of its output as the table,
// headed by the commit the host passed and the guest's kernel; without
// RXEVM_BENCH_MARKDOWN=1 nothing is printed. Runs on the host too.
func TestBenchMarkdown(t *testing.T) {
	const table = "| size | Go | C |\n|---|---|---|\n| 64 B | 1 | 2 |\n"
	t.Setenv("RXEVM_BENCH_MARKDOWN", "")
	var out strings.Builder
	if err := writeBenchMarkdown(&out, "server", table); err != nil || out.Len() != 0 {
		t.Fatalf("without RXEVM_BENCH_MARKDOWN: %q, %v; want nothing", out.String(), err)
	}
	t.Setenv("RXEVM_BENCH_MARKDOWN", "1")
	t.Setenv("RXEVM_BENCH_COMMIT", "0123abcd")
	if err := writeBenchMarkdown(&out, "server", table); err != nil {
		t.Fatal(err)
	}
	sections, err := benchmd.Extract(strings.NewReader("--- PASS\n" + out.String() + "ok\n"))
	if err != nil {
		t.Fatal(err)
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	head := fmt.Sprintf("<!-- bench:server begin -->\nMeasured on commit 0123abcd, kernel %s, %s, ", unix.ByteSliceToString(uts.Release[:]), benchMode())
	if sec := sections["server"]; !strings.HasPrefix(sec, head) || !strings.HasSuffix(sec, ".\n\n"+table+"<!-- bench:server end -->\n") {
		t.Errorf("section:\n%s\nwant it to start %q and end with the table", sec, head)
	}
}
