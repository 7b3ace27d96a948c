package server

import (
	"context"
	"fmt"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// watchRemoval ends the server once its device is found removed (see
// uverbs.ErrDeviceRemoved): Err then returns the removal error, which
// names the device, and the server closes, releasing the device so that
// the kernel's removal can finish. A goroutine waits on the Context's
// removal fd with an fdwait.Poller, which Close closes.
func (s *Server) watchRemoval() error {
	fd := s.dev.ctx.RemovalFD()
	if fd < 0 {
		return nil // the Context does not watch its device
	}
	p, err := fdwait.New(fdwait.Netpoll) // a wait for the server's life: no thread
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.removalWait = p
	go func() {
		if err := p.Wait(context.Background(), time.Time{}, fd); err != nil {
			return // closed: the server is closing
		}
		s.fail(s.dev.ctx.Err())
		s.Close()
	}()
	return nil
}
