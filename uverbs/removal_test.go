package uverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

func TestDevPresent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dev")
	if ok, err := devPresent(path, unix.Mkdev(231, 2)); ok || err != nil {
		t.Errorf("missing file: %v, %v; want absent, no error", ok, err)
	}
	os.WriteFile(path, []byte("231:2\n"), 0o644)
	if ok, err := devPresent(path, unix.Mkdev(231, 2)); !ok || err != nil {
		t.Errorf("same device: %v, %v; want present", ok, err)
	}
	if ok, err := devPresent(path, unix.Mkdev(231, 3)); ok || err != nil {
		t.Errorf("another device under the name: %v, %v; want absent", ok, err)
	}
	for _, bad := range []string{"", "231", "x:2", "231:-1", "99999999999:1"} {
		os.WriteFile(path, []byte(bad), 0o644)
		if _, err := devPresent(path, unix.Mkdev(231, 2)); err == nil {
			t.Errorf("dev %q: no error", bad)
		}
	}
}

// removalContext is a Context over /dev/null (a character device) whose
// fake sysfs entry names it, watched every millisecond.
func removalContext(t *testing.T) (c *Context, entry string) {
	t.Helper()
	old := PresenceInterval
	PresenceInterval = time.Millisecond
	t.Cleanup(func() { PresenceInterval = old })
	raw, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skip(err)
	}
	var st unix.Stat_t
	unix.Fstat(raw, &st)
	sysfs := t.TempDir()
	dir := filepath.Join(sysfs, "class", "infiniband_verbs", "uverbs3")
	os.MkdirAll(dir, 0o755)
	entry = filepath.Join(dir, "dev")
	os.WriteFile(entry, []byte(fmt.Sprintf("%d:%d\n", unix.Major(st.Rdev), unix.Minor(st.Rdev))), 0o644)
	r, _ := nonblockingPipe(t)
	p, err := fdwait.New(fdwait.Netpoll)
	if err != nil {
		t.Fatal(err)
	}
	c = &Context{
		dev:       Device{Name: "rxe7", Path: "/dev/infiniband/uverbs3", Index: 3},
		fd:        ownFD(raw, "test"),
		asyncFD:   &fileDesc{raw: r},
		asyncWait: p,
		sysfs:     sysfs,
	}
	if err := c.watchPresence(); err != nil {
		t.Fatal(err)
	}
	if c.RemovalFD() < 0 {
		t.Fatal("the Context does not watch a device whose entry names its fd")
	}
	t.Cleanup(func() {
		p.Close()
		c.removal.stop()
		c.fd.close()
	})
	return c, entry
}

// The sysfs entry going away makes Err the removal error naming the
// device, the removal fd readable, and WaitAsyncEvent return the events
// queued before it, then the error; Err allocates nothing either way.
func TestContextNoticesRemoval(t *testing.T) {
	c, entry := removalContext(t)
	time.Sleep(20 * time.Millisecond) // several looks while present
	if err := c.Err(); err != nil {
		t.Fatalf("Err while the entry is there: %v", err)
	}
	if a := testing.AllocsPerRun(100, func() { c.Err() }); a != 0 {
		t.Errorf("Err allocates %v times while the device is there", a)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := c.WaitAsyncEvent(wctx)
		waited <- err
	}()
	os.Remove(entry)
	select {
	case err := <-waited:
		var re *DeviceRemovedError
		if !errors.Is(err, ErrDeviceRemoved) || !errors.As(err, &re) || re.Device != "rxe7" || !strings.Contains(err.Error(), "rxe7") {
			t.Fatalf("WaitAsyncEvent after the removal: %v; want the removal of rxe7", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitAsyncEvent not woken by the removal")
	}
	fds := []unix.PollFd{{Fd: int32(c.RemovalFD()), Events: unix.POLLIN}}
	if n, _ := unix.Poll(fds, 0); n != 1 {
		t.Error("the removal fd is not readable")
	}
	if a := testing.AllocsPerRun(100, func() { c.Err() }); a != 0 {
		t.Errorf("Err allocates %v times once removed", a)
	}
}

// A Context whose fd is no character device, or whose sysfs entry is
// missing or names another device, does not watch: no false alarm.
func TestContextWatchesOnlyItsDevice(t *testing.T) {
	r, _ := nonblockingPipe(t)
	c := &Context{fd: &fileDesc{raw: r}, sysfs: t.TempDir(), dev: Device{Index: 0}}
	if err := c.watchPresence(); err != nil || c.RemovalFD() != -1 || c.Err() != nil {
		t.Errorf("a pipe: watch %v, RemovalFD %d, Err %v; want no watch", err, c.RemovalFD(), c.Err())
	}
}
