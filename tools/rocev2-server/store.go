package main

import (
	"bufio"
	"fmt"
	"os"
)

// store appends frame payloads to the -o file, buffered, until the first
// write, flush or close error: then it stops storing and keeps the error
// for the summary and the exit status, so that a full disk never yields a
// silently truncated file.
type store struct {
	path   string
	f      *os.File
	w      *bufio.Writer
	frames uint64 // frames handed to the buffer before any error (all stored without one)
	onDisk int64  // bytes the file took (written through the buffer)
	err    error  // the first error; nothing is stored after it
	closed bool
	report func(error)
}

// openStore opens path for appending; report, if not nil, is told of the
// first error when it happens (the summary tells it again at the end).
func openStore(path string, report func(error)) (*store, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s := &store{path: path, f: f, report: report}
	s.w = bufio.NewWriterSize(fileCounter{s}, 1<<20)
	return s, nil
}

// fileCounter counts what the file took.
type fileCounter struct{ s *store }

func (c fileCounter) Write(p []byte) (int, error) {
	n, err := c.s.f.Write(p)
	c.s.onDisk += int64(n)
	return n, err
}

// write appends one payload; after an error it does nothing.
func (s *store) write(p []byte) {
	if s.err != nil {
		return
	}
	if _, err := s.w.Write(p); err != nil {
		s.fail(err) // an *os.PathError: it names the write and the file
		return
	}
	s.frames++
}

func (s *store) fail(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	if s.report != nil {
		s.report(err)
	}
}

// close flushes what is buffered and closes the file, once; it returns
// the first error of the whole run.
func (s *store) close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	if s.err == nil {
		if err := s.w.Flush(); err != nil {
			s.fail(fmt.Errorf("flush: %w", err))
		}
	}
	if err := s.f.Close(); err != nil {
		s.fail(err)
	}
	return s.err
}

// summary is the store's line of the summary.
func (s *store) summary() string {
	if s.err != nil {
		return fmt.Sprintf("output %s: storing STOPPED at frame %d: %v; the file took the first %d bytes of this run", s.path, s.frames+1, s.err, s.onDisk)
	}
	return fmt.Sprintf("output %s: %d frames, %d bytes", s.path, s.frames, s.onDisk)
}
