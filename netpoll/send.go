//go:build linux

package netpoll

import (
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Send writes p on the source's connected socket without blocking. Call it
// from a handler (or the goroutine calling Poll).
//
// On a stream, what the kernel does not take now is held back and written,
// in order, as the socket becomes writable again (EPOLLOUT; every pass for
// RecvBusy without PerQueue), before anything sent later: Send returns
// len(p) and nil. Only more than Config.SendBuffer bytes held back for one
// stream is refused, with ErrSendBufferFull and the count of what was
// taken. Held-back bytes are dropped when the source leaves. A datagram
// socket sends p as one datagram, as SendTo does.
//
// It allocates nothing once the held-back buffer has grown to what the
// stream needs.
func (d *Driver) Send(id ConnID, p []byte) (int, error) {
	return d.SendTo(id, p, netip.AddrPort{})
}

// Buffered is how many bytes Send holds back for the stream id (zero for a
// datagram socket). Call it where Send may be called.
func (d *Driver) Buffered(id ConnID) (int, error) {
	i, err := d.socketSlot(id)
	if err != nil {
		return 0, err
	}
	return len(d.slots[i].out), nil
}

// sendStream writes p after whatever is held back, and holds back what the
// kernel does not take.
func (d *Driver) sendStream(i int, p []byte) (int, error) {
	s := &d.slots[i]
	taken := 0
	if len(s.out) == 0 {
		n, e := sendTo(s.fd, s.family, p, netip.AddrPort{})
		switch e {
		case 0:
			taken = n
		case unix.EAGAIN, unix.EINTR:
		default:
			return 0, os.NewSyscallError("sendto", e)
		}
		if taken == len(p) {
			return taken, nil
		}
	}
	rest := p[taken:]
	if len(s.out)+len(rest) > d.cfg.SendBuffer {
		if taken > 0 {
			d.watchWritable(i) // the kernel took part: it may take more later
		}
		return taken, ErrSendBufferFull
	}
	s.out = append(s.out, rest...)
	d.watchWritable(i)
	return len(p), nil
}

// watchWritable asks epoll to report the socket in slot i writable, once.
func (d *Driver) watchWritable(i int) {
	s := &d.slots[i]
	if s.writable {
		return
	}
	s.writable = true
	d.writers++
	if s.inEpoll {
		d.setEvents(i, unix.EPOLLIN|unix.EPOLLOUT)
	}
}

// setEvents changes what epoll reports for the socket in slot i. It goes
// through epoll_ctl directly: unix.EpollCtl would box its error.
func (d *Driver) setEvents(i int, events uint32) {
	s := &d.slots[i]
	ev := unix.EpollEvent{Events: events, Fd: int32(i), Pad: int32(s.gen)}
	epollCtlMod(d.ep, s.fd, &ev)
}

// flushSlot writes what slot i holds back, as far as the kernel takes it.
// Emptied, the socket leaves EPOLLOUT; a failed write closes the source.
func (d *Driver) flushSlot(i int) {
	s := &d.slots[i]
	for len(s.out) > 0 {
		n, e := sendTo(s.fd, s.family, s.out, netip.AddrPort{})
		switch e {
		case 0:
			s.out = s.out[:copy(s.out, s.out[n:])]
			continue
		case unix.EAGAIN, unix.EINTR:
			return
		}
		d.closeSlot(i, Failed, fmt.Errorf("netpoll: flushing held-back data: %w", os.NewSyscallError("sendto", e)))
		return
	}
	if s.writable {
		s.writable = false
		d.writers--
		if s.inEpoll {
			d.setEvents(i, unix.EPOLLIN)
		}
	}
}

// flushAll is RecvBusy's writability check without epoll: one write per
// stream with held-back data, every pass.
func (d *Driver) flushAll() {
	for _, i := range d.socks {
		if d.slots[i].writable {
			d.flushSlot(i)
		}
	}
}
