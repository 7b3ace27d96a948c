// Package waitprocs gives a tool that sleeps in system calls (completion
// channels) a second P on a one-CPU machine.
//
// With one P (GOMAXPROCS=1, the runtime's default on one CPU) a goroutine
// that sleeps in a system call for longer than two of sysmon's ticks
// (20 us and more) has its P taken back by sysmon, which finds no idle P
// to leave it to; the P goes idle, so sysmon parks, and the next system
// call wakes it again at its shortest tick. Each completion wait then costs
// a futex wake, one or two nanosleeps, a hand-off of the P and about four
// context switches instead of one — what a C program's blocking read does
// not pay. With a second, idle P sysmon leaves a P in a system call alone
// and sleeps at its longest tick; the second P runs nothing.
//
// Measured on one vCPU under QEMU's -icount (guest time counts
// instructions), rc-pingpong -e, Go/C of the client's usec/iter over 3
// interleaved rounds, with GOMAXPROCS=1 (as before) and with Ensure: on
// Linux 6.12, where rxe's work runs in kworkers and a wait lasts 90 us,
// 4 KiB 1.198 -> 1.058 and 64 B 1.200 -> 1.178; on 6.1 4 KiB 1.063 ->
// 1.036, 64 B 1.184 -> 1.170. Traced (integration TestEventTraceAccount),
// 6.12 4 KiB: futex calls per iteration 1.1 -> 0.2, nanosleeps 1.9 -> 0,
// context switches per end 4.2 -> 1.7 (C: 1.6).
package waitprocs

import (
	"os"
	"runtime"
)

// Ensure raises GOMAXPROCS to 2 when it is below and the environment does
// not set it (an explicit GOMAXPROCS=1 is kept).
func Ensure() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}
