package vm

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLockExcludesAnotherRun(t *testing.T) {
	dir := t.TempDir()
	unlock, err := (&Cache{Dir: dir}).Lock()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		// Another run: its own open of the lock file, as another process has.
		u, err := (&Cache{Dir: dir, Log: io.Discard}).Lock()
		if err != nil {
			t.Error(err)
			u = func() {}
		}
		got <- u
	}()
	select {
	case u := <-got:
		u()
		t.Fatal("a second run took the lock while the first held it")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case u := <-got:
		u()
	case <-time.After(5 * time.Second):
		t.Fatal("the second run did not get the lock after the first released it")
	}
}

// fakeDpkg plays apt-get download, dpkg-deb --info and dpkg -x: a package
// whose name starts with "bad" downloads truncated.
type fakeDpkg struct{ downloads int }

func (f *fakeDpkg) exec(dir, name string, args ...string) ([]byte, error) {
	switch {
	case name == "apt-get" && args[len(args)-1] != "update":
		for _, p := range args[1:] {
			f.downloads++
			body := "!<arch>\n" + p
			if strings.HasPrefix(p, "bad") {
				body = "!<ar"
			}
			os.WriteFile(filepath.Join(dir, p+"_1.0_amd64.deb"), []byte(body), 0o644)
		}
	case name == "dpkg-deb":
		b, _ := os.ReadFile(args[1])
		if !strings.HasPrefix(string(b), "!<arch>\n") {
			return nil, os.ErrInvalid
		}
	case name == "dpkg":
		b, _ := os.ReadFile(args[1])
		pkg := strings.TrimPrefix(string(b), "!<arch>\n")
		return nil, os.WriteFile(filepath.Join(args[2], pkg+".txt"), b, 0o644)
	}
	return nil, nil
}

func TestUnpackIsAtomicAndRedoesInterruptedWork(t *testing.T) {
	f := &fakeDpkg{}
	c := &Cache{Dir: t.TempDir(), Log: io.Discard, exec: f.exec}
	dir := filepath.Join(c.Dir, "peers")

	// What an interrupted run leaves: a half-made tree, a stale temporary
	// directory with a complete-looking marker, and a partial download.
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "half.txt"), nil, 0o644)
	stale := filepath.Join(c.Dir, ".peers.tmp-123", "tree")
	os.MkdirAll(stale, 0o755)
	os.WriteFile(filepath.Join(stale, completeMarker), nil, 0o644)

	posted := false
	if err := c.unpack(dir, nil, []string{"a", "b"}, func(tree string) error {
		posted = true
		if _, err := os.Stat(filepath.Join(tree, "a.txt")); err != nil {
			t.Errorf("post ran before the packages were extracted: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a.txt", "b.txt", completeMarker} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("%s missing: %v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "half.txt")); err == nil {
		t.Error("the interrupted run's tree was trusted")
	}
	if !posted {
		t.Error("post was not run")
	}
	if left, _ := filepath.Glob(filepath.Join(c.Dir, ".peers.tmp-*")); len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}

	// A complete tree is used as it is.
	n := f.downloads
	if err := c.unpack(dir, nil, []string{"a", "b"}, nil); err != nil || f.downloads != n {
		t.Errorf("a complete tree was fetched again (%v)", err)
	}

	// A download that fails verification leaves nothing behind.
	bad := filepath.Join(c.Dir, "kernel", "bad-kernel")
	if err := c.unpack(bad, nil, []string{"bad-kernel"}, nil); err == nil || !strings.Contains(err.Error(), "not a valid package") {
		t.Errorf("a truncated package: %v", err)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a tree was made from a truncated package")
	}
	if left, _ := filepath.Glob(filepath.Join(c.Dir, "kernel", ".*")); len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}

func TestRunWaitsForAptsLock(t *testing.T) {
	saved := aptLockPause
	aptLockPause = time.Millisecond
	t.Cleanup(func() { aptLockPause = saved })
	calls := 0
	c := &Cache{Dir: t.TempDir(), Log: io.Discard, exec: func(dir, name string, args ...string) ([]byte, error) {
		calls++
		if calls < 3 {
			return nil, errors.New("E: Could not get lock /var/lib/apt/lists/lock. It is held by process 28388 (apt-get)")
		}
		return []byte("ok"), nil
	}}
	if out, err := c.run("", "apt-get", "update"); err != nil || string(out) != "ok" || calls != 3 {
		t.Errorf("got %q, %v after %d calls; want success on the third", out, err, calls)
	}
	calls = 0
	if _, err := c.run("", "dpkg", "-x"); err == nil || calls != 1 {
		t.Errorf("a failing dpkg was retried (%d calls) or succeeded (%v)", calls, err)
	}
}
