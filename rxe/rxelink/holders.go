package rxelink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// proc is where the process table is; tests point it at a tree of their
// own.
var proc = "/proc"

// ErrHeld is matched (errors.Is) by the *HeldError of a deletion that a
// process holding the device open prevents.
var ErrHeld = errors.New("rxelink: device held open")

// Holder is one process that holds an RDMA device's uverbs file: the
// kernel does not delete the device until every such file is closed and
// unmapped.
type Holder struct {
	PID      int
	Command  string // /proc/PID/comm
	FDs      []int  // descriptors open on the uverbs file
	Mappings int    // mappings of it (rings of QPs, CQs, SRQs)
	Self     bool   // the calling process
}

func (h Holder) String() string {
	var parts []string
	if len(h.FDs) > 0 {
		fds := make([]string, len(h.FDs))
		for i, fd := range h.FDs {
			fds[i] = strconv.Itoa(fd)
		}
		parts = append(parts, "fd "+strings.Join(fds, ","))
	}
	if h.Mappings > 0 {
		parts = append(parts, fmt.Sprintf("%d mappings", h.Mappings))
	}
	who := fmt.Sprintf("pid %d (%s)", h.PID, h.Command)
	if h.Self {
		who = fmt.Sprintf("this process, pid %d (%s)", h.PID, h.Command)
	}
	return who + ": " + strings.Join(parts, ", ")
}

// HeldError is Delete's answer when processes keep the device open.
type HeldError struct {
	Link    string
	Path    string // the uverbs character device, e.g. /dev/infiniband/uverbs2
	Holders []Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("rxelink: rdma link delete %s: %s is still open (%s); the kernel would wait for it without end: close every uverbs Context (and its QPs, CQs, SRQs) on %s first; the link is left in place",
		e.Link, e.Path, describe(e.Holders), e.Link)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

func describe(hs []Holder) string {
	if len(hs) == 0 {
		return "none seen"
	}
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.String()
	}
	return strings.Join(s, "; ")
}

// UverbsPath returns the uverbs character device of the RDMA device name,
// e.g. /dev/infiniband/uverbs0 for rxe0.
func UverbsPath(name string) (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(sysfs, "class/infiniband_verbs/uverbs*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "ibdev"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return "/dev/infiniband/" + filepath.Base(d), nil
		}
	}
	return "", fmt.Errorf("rxelink: %s has no uverbs device under %s: %w", name, filepath.Join(sysfs, "class/infiniband_verbs"), os.ErrNotExist)
}

// Holders lists the processes that hold the uverbs file of the RDMA device
// name open or mapped, this one included (Self).
func Holders(name string) ([]Holder, error) {
	path, err := UverbsPath(name)
	if err != nil {
		return nil, err
	}
	return holdersOf(path)
}

func holdersOf(path string) ([]Holder, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("rxelink: read %s: %w", proc, err)
	}
	self := os.Getpid()
	var hs []Holder
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		h := Holder{PID: pid, Self: pid == self}
		pdir := filepath.Join(proc, e.Name())
		fds, _ := os.ReadDir(filepath.Join(pdir, "fd"))
		for _, f := range fds {
			if target, err := os.Readlink(filepath.Join(pdir, "fd", f.Name())); err == nil && target == path {
				if fd, err := strconv.Atoi(f.Name()); err == nil {
					h.FDs = append(h.FDs, fd)
				}
			}
		}
		h.Mappings = countMappings(filepath.Join(pdir, "maps"), path)
		if len(h.FDs) == 0 && h.Mappings == 0 {
			continue
		}
		sort.Ints(h.FDs)
		if b, err := os.ReadFile(filepath.Join(pdir, "comm")); err == nil {
			h.Command = strings.TrimSpace(string(b))
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// countMappings counts the lines of a /proc/PID/maps file that map path.
func countMappings(maps, path string) int {
	f, err := os.Open(maps)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasSuffix(sc.Text(), " "+path) {
			n++
		}
	}
	return n
}

// pollHolders is how often waitUnheld looks again.
const pollHolders = 50 * time.Millisecond

// waitUnheld returns when nothing holds name's uverbs file, or a
// *HeldError when something still does at ctx's deadline (at once when the
// holder is this process).
func waitUnheld(ctx context.Context, name string) error {
	path, err := UverbsPath(name)
	if err != nil {
		// Without a uverbs device nothing can hold the link (ib_uverbs
		// not loaded, or the device is going away already).
		return nil
	}
	for {
		hs, err := holdersOf(path)
		if err != nil {
			return err
		}
		if len(hs) == 0 {
			return nil
		}
		self := false
		for _, h := range hs {
			self = self || h.Self
		}
		if self || ctx.Err() != nil {
			return &HeldError{Link: name, Path: path, Holders: hs}
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollHolders):
		}
	}
}
