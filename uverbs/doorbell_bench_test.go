package uverbs

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkDoorbellWriteOverhead is what pureverbs adds to the kernel's
// post_send doorbell, its lifetime gates (the QP's and the Context's)
// included: the POST_SEND command built and written to /dev/null.
func BenchmarkDoorbellWriteOverhead(b *testing.B) {
	fd, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	qp := &QP{pd: &PD{ctx: &Context{fd: &fileDesc{raw: fd}}}, handle: 1}
	b.ReportAllocs()
	for b.Loop() {
		if err := qp.PostSendDoorbell(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGateEnterLeave is the lifetime check every command pays per
// object: two atomic adds.
func BenchmarkGateEnterLeave(b *testing.B) {
	var g gate
	for b.Loop() {
		if !g.enter() {
			b.Fatal("closed")
		}
		g.leave()
	}
}
