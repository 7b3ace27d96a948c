package streamperf

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// The pattern is format_buf's counter: it runs on across buffers and
// wraps at 256; the checking side keeps its own counter, and its failure
// names the offset over everything checked, as verify_buf's printf does.
func TestPattern(t *testing.T) {
	var p Pattern
	a, b := make([]byte, 200), make([]byte, 100)
	p.Fill(a)
	p.Fill(b)
	if a[0] != 0 || a[199] != 199 || b[0] != 200 || b[55] != 255 || b[56] != 0 {
		t.Fatalf("pattern %v %v", a[:3], b[54:58])
	}
	if err := p.Check(a); err != nil {
		t.Fatal(err)
	}
	b[70] ^= 1
	err := p.Check(b)
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Offset != 270 || err.Error() != "data verification failed byte 270" {
		t.Errorf("corrupt byte: %v", err)
	}
}

// A Stream under -T v fills what it sends and, on receiving a byte out of
// the pattern, prints the C tools' line on stdout and fails; a read cut
// short by the peer is rrecv's error on stderr.
func TestStreamVerify(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	var stdout, stderr bytes.Buffer
	rx := &Stream{Conn: c1, Buf: make([]byte, 64), Verify: true, Pattern: new(Pattern), Out: &stdout, Err: &stderr}
	go func() {
		tx := &Stream{Conn: c2, Buf: make([]byte, 64), Verify: true, Pattern: new(Pattern), Out: io.Discard, Err: io.Discard}
		tx.Send(SyncSize)
		tx.Pattern.Fill(tx.Buf[:10]) // skip ten bytes of the pattern
		tx.Send(64)
		c2.Write([]byte{1, 2, 3})
		c2.Close()
	}()
	if err := rx.Recv(SyncSize); err != nil {
		t.Fatal(err)
	}
	if err := rx.Recv(64); err == nil || stdout.String() != "data verification failed byte 16\n" {
		t.Errorf("skipped pattern: %v, stdout %q", err, stdout.String())
	}
	rx.Verify = false
	if err := rx.Recv(4); err == nil || stderr.String() != "rrecv: Connection reset by peer\n" {
		t.Errorf("short read: %v, stderr %q", err, stderr.String())
	}
}
