//go:build linux

package vethns

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// DeferNAPI sets n's veth end to defer its receive interrupts: after a NAPI
// poll that did work, up to irqs further polls are left to a timer of flush
// (napi_defer_hard_irqs, gro_flush_timeout), so packets wait in the veth's
// ring until the timer fires or an application busy-polls the queue. It
// makes busy polling observable: with a long flush a packet arrives at once
// only if someone busy-polls. It needs GRO on (the veth's NAPI path).
//
// The two settings exist only in sysfs, and a sysfs mount shows the devices
// of the network namespace it was mounted from; so a throwaway thread enters
// n, mounts a sysfs of its own in a private mount namespace, writes, and
// dies with both.
func (n *NS) DeferNAPI(irqs int, flush time.Duration) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread leaves with its mount namespace.
		runtime.LockOSThread()
		errc <- n.writeSysfs(map[string]string{
			"napi_defer_hard_irqs": strconv.Itoa(irqs),
			"gro_flush_timeout":    strconv.FormatInt(flush.Nanoseconds(), 10),
		})
	}()
	return <-errc
}

// writeSysfs writes values into n's link directory of a sysfs mounted from
// inside n. The calling thread must be locked and thrown away afterwards.
func (n *NS) writeSysfs(values map[string]string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("vethns: unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("vethns: make mounts private: %w", err)
	}
	if err := unix.Setns(int(n.handle), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("vethns: enter namespace: %w", err)
	}
	dir, err := os.MkdirTemp("", "vethns-sysfs-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := unix.Mount("sysfs", dir, "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("vethns: mount sysfs: %w", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	for name, v := range values {
		p := filepath.Join(dir, "class", "net", n.Link, name)
		if err := os.WriteFile(p, []byte(v), 0); err != nil {
			return fmt.Errorf("vethns: %s: %w", name, err)
		}
	}
	return nil
}
