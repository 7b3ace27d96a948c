package rxelink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeProc builds a /proc with the given processes: pid -> fds that point
// at path, and mapping lines of it.
func fakeProc(t *testing.T, procs map[int][2]int, path string) {
	t.Helper()
	saved := proc
	t.Cleanup(func() { proc = saved })
	proc = t.TempDir()
	for pid, p := range procs {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		write(t, filepath.Join(dir, "comm"), "peer"+strconv.Itoa(pid)+"\n")
		if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Symlink("/dev/null", filepath.Join(dir, "fd", "0"))
		for i := range p[0] {
			os.Symlink(path, filepath.Join(dir, "fd", strconv.Itoa(5+i)))
		}
		maps := "7f0000000000-7f0000001000 r-xp 00000000 00:05 10 /usr/bin/peer\n"
		for i := range p[1] {
			maps += "7f00000" + strconv.Itoa(i) + "0000-7f00000" + strconv.Itoa(i) + "1000 rw-s 00000000 00:05 77 " + path + "\n"
		}
		write(t, filepath.Join(dir, "maps"), maps)
	}
	write(t, filepath.Join(proc, "self"), "") // not a pid: ignored
}

func uverbsDevice(t *testing.T, sys, name, uverbs string) {
	write(t, filepath.Join(sys, "class/infiniband", name, "parent"), "veth7\n")
	write(t, filepath.Join(sys, "class/infiniband_verbs", uverbs, "ibdev"), name+"\n")
}

// Delete of a link this process holds fails at once, naming the fd and the
// mappings, and never makes the netlink call (which would not return).
func TestDeleteHeldBySelfFailsNamingTheHolder(t *testing.T) {
	sys := fakeSysfs(t)
	uverbsDevice(t, sys, "rxe0", "uverbs0")
	uverbsDevice(t, sys, "rxe9", "uverbs3")
	fakeProc(t, map[int][2]int{os.Getpid(): {1, 2}, 4242: {0, 0}}, "/dev/infiniband/uverbs3")
	saved := deleteLink
	t.Cleanup(func() { deleteLink = saved })
	deleteLink = func(string) error { t.Error("netlink delete called on a held link"); return nil }

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err := Delete(ctx, "rxe9")
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
		t.Fatalf("Delete of a held link: %v, want a *HeldError", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Delete took %v to see this process holds the link", d)
	}
	msg := err.Error()
	for _, want := range []string{"rxe9", "/dev/infiniband/uverbs3", "this process, pid " + strconv.Itoa(os.Getpid()), "fd 5", "2 mappings", "close every uverbs Context"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

// Another process's hold is waited for until the deadline, then named;
// once it is gone, Delete deletes.
func TestDeleteWaitsForOtherHolders(t *testing.T) {
	sys := fakeSysfs(t)
	uverbsDevice(t, sys, "rxe9", "uverbs3")
	fakeProc(t, map[int][2]int{4242: {2, 0}}, "/dev/infiniband/uverbs3")
	var deleted []string
	saved := deleteLink
	t.Cleanup(func() { deleteLink = saved })
	deleteLink = func(name string) error { deleted = append(deleted, name); return nil }

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Delete(ctx, "rxe9")
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid 4242 (peer4242): fd 5,6") {
		t.Fatalf("Delete held by pid 4242: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("Delete gave up after %v, before its deadline", d)
	}
	if len(deleted) != 0 {
		t.Errorf("deleted %v while held", deleted)
	}

	// The holder exits a moment into the next attempt.
	holder := filepath.Join(proc, "4242")
	go func() {
		time.Sleep(100 * time.Millisecond)
		os.RemoveAll(holder)
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := Delete(ctx2, "rxe9"); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0] != "rxe9" {
		t.Errorf("deleted %v, want [rxe9]", deleted)
	}
}

// A kernel that does not answer (a holder /proc did not show): Delete
// returns by its deadline, saying so.
func TestDeleteReturnsByTheDeadlineWhenTheKernelBlocks(t *testing.T) {
	sys := fakeSysfs(t)
	uverbsDevice(t, sys, "rxe9", "uverbs3")
	fakeProc(t, nil, "/dev/infiniband/uverbs3")
	release := make(chan struct{})
	defer close(release)
	saved := deleteLink
	t.Cleanup(func() { deleteLink = saved })
	deleteLink = func(string) error { <-release; return nil }

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Delete(ctx, "rxe9")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer from the kernel") {
		t.Errorf("Delete with a blocked kernel: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Delete returned after %v, its deadline was 200ms", d)
	}
	if err := Delete(ctx, "rxe8"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Delete of a device that does not exist: %v, want ErrNotExist", err)
	}
}

func TestListNamesRxeLinksAndTheirNetdevs(t *testing.T) {
	sys := fakeSysfs(t)
	uverbsDevice(t, sys, "rxe1", "uverbs1")
	uverbsDevice(t, sys, "rxe0", "uverbs0")
	write(t, filepath.Join(sys, "class/infiniband/mlx5_0/node_type"), "1: CA\n") // not rxe
	links, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 2 || links[0] != (Link{"rxe0", "veth7"}) || links[1] != (Link{"rxe1", "veth7"}) {
		t.Errorf("List = %v", links)
	}
}
