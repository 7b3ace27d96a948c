//go:build linux

package main

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pinning is the CPU each end's receive thread is bound to.
type pinning struct{ server, client int }

// parsePinning reads -pin: "server,client" CPU numbers, or "" for none.
// Both must be distinct CPUs this process may run on.
func parsePinning(s string) (*pinning, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 2 {
		return nil, fmt.Errorf("-pin %q: want two CPUs, server,client", s)
	}
	var cpus [2]int
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-pin %q: %q is not a CPU number", s, p)
		}
		cpus[i] = n
	}
	if cpus[0] == cpus[1] {
		return nil, fmt.Errorf("-pin %q: the two ends need CPUs of their own", s)
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	for _, c := range cpus {
		if !allowed.IsSet(c) {
			return nil, fmt.Errorf("-pin %q: CPU %d is not available to this process (%d CPUs)", s, c, allowed.Count())
		}
	}
	return &pinning{server: cpus[0], client: cpus[1]}, nil
}

// String describes the pinning for the table's header.
func (p *pinning) String() string {
	if p == nil {
		return "threads not pinned"
	}
	return fmt.Sprintf("drivers: server end's thread pinned to CPU %d, client end's to CPU %d (net.UDPConn not pinned)", p.server, p.client)
}

// pinThread binds the calling goroutine's OS thread to cpu (no-op for
// cpu < 0). The goroutine stays locked to the thread for the rest of its
// life, so the runtime discards the thread when it ends instead of running
// other goroutines on a CPU-bound thread.
func pinThread(cpu int) error {
	if cpu < 0 {
		return nil
	}
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity CPU %d: %w", cpu, err)
	}
	return nil
}

// cpus is the server's and client's CPU, -1 each when not pinned.
func (p *pinning) cpus() (server, client int) {
	if p == nil {
		return -1, -1
	}
	return p.server, p.client
}
