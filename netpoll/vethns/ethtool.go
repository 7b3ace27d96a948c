//go:build linux

package vethns

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolCmd is struct ethtool_value from <linux/ethtool.h>: the argument of
// the legacy one-flag ethtool commands (ETHTOOL_GGRO, ETHTOOL_SGRO).
type ethtoolCmd struct {
	Cmd  uint32
	Data uint32
}

// ifreqData is struct ifreq from <linux/if.h> with the ifr_data member of
// its union: SIOCETHTOOL passes the ethtool command through that pointer.
// The pointer is typed so the GC keeps the command alive across the ioctl.
type ifreqData struct {
	Name [unix.IFNAMSIZ]byte
	Data *ethtoolCmd
	_    [16]byte
}

// setNAPI turns GRO on and TSO off for the named link in the calling
// thread's namespace (see Config.GRO).
func setNAPI(link string) error {
	if _, err := ethtoolValue(link, unix.ETHTOOL_SGRO, 1); err != nil {
		return err
	}
	_, err := ethtoolValue(link, unix.ETHTOOL_STSO, 0)
	return err
}

// ethtoolValue runs one ethtool_value command on link and returns the value
// the kernel wrote back.
func ethtoolValue(link string, cmd, data uint32) (uint32, error) {
	if len(link) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("vethns: link name %q too long", link)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("vethns: ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	ec := &ethtoolCmd{Cmd: cmd, Data: data}
	var ifr ifreqData
	copy(ifr.Name[:], link)
	ifr.Data = ec
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(ec)
	if errno != 0 {
		return 0, fmt.Errorf("vethns: ethtool %#x on %s: %w", cmd, link, errno)
	}
	return ec.Data, nil
}
