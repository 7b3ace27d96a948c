// Package errwriter keeps the first write error of a tool's report: the
// tools print their results with many small writes whose errors nobody
// checks one by one (stdout on a full disk, a closed pipe), and a report
// that lost lines must not end with exit status 0.
package errwriter

import "io"

// Writer passes writes through to an underlying writer until one fails;
// from then on it writes nothing and returns that error, which Err keeps.
// A short write without an error counts as io.ErrShortWrite.
type Writer struct {
	w   io.Writer
	err error
}

// New returns a Writer writing to w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p unless an earlier write failed.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	w.err = err
	return n, err
}

// Err is the first write error, or nil.
func (w *Writer) Err() error { return w.err }
