package streamperf

import "fmt"

// Pattern is the data -T v sends and checks: a byte counter that runs on
// across every buffer an end sends (its format_buf) and, separately,
// across every buffer it receives (its verify_buf), wrapping at 256. The
// 16-byte sync is part of the stream.
type Pattern struct {
	next     byte  // the next byte to send
	expect   byte  // the next byte due
	received int64 // bytes checked so far
}

// Fill writes the next len(b) bytes of the sending counter into b.
func (p *Pattern) Fill(b []byte) {
	for i := range b {
		b[i] = p.next
		p.next++
	}
}

// VerifyError is a received byte that broke the pattern; its message is
// the C tools' line.
type VerifyError struct {
	Offset int64 // counted over all bytes checked
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("data verification failed byte %d", e.Offset)
}

// Check verifies b against the receiving counter. At the first wrong
// byte it returns a *VerifyError and, like verify_buf, leaves the counters
// as they stood there.
func (p *Pattern) Check(b []byte) error {
	for _, c := range b {
		if c != p.expect {
			p.expect++
			return &VerifyError{Offset: p.received}
		}
		p.expect++
		p.received++
	}
	return nil
}
