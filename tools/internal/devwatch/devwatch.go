// Package devwatch ends a command-line tool whose RDMA device is removed.
//
// rdma_rxe cannot take a device away from its users: `rdma link delete`
// waits in the kernel until every process has closed the device's uverbs
// fds. A tool's verbs loops learn of the removal from the errors its posts,
// polls and waits return (uverbs.ErrDeviceRemoved), but a tool can hold
// the device while blocked elsewhere: a server waiting for its client's
// TCP connection, an exchange with a silent peer. There the tool would
// hold the delete for as long as it waits. Exit covers those: once the
// device is found removed it gives the tool's own error path a moment to
// report, then prints the removal error and exits non-zero, upon which the
// kernel closes the process's fds and mappings and the delete completes.
package devwatch

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// Grace is how long Exit lets the tool's own error path report the
// removal (a post or poll that failed) before it exits the process itself.
const Grace = time.Second

// Exit watches devctx's device from a goroutine waiting on its RemovalFD
// through an fdwait.Poller. Once the device is removed it waits Grace,
// then writes "prog: <the removal error>" to stderr and exits with status
// 1. The returned stop ends the watch (the goroutine leaves its wait, and
// one already past it does not exit); call it before closing devctx. A
// Context that does not watch its device (RemovalFD -1) gets a stop that
// does nothing.
func Exit(devctx *uverbs.Context, prog string, stderr io.Writer) (stop func(), err error) {
	fd := devctx.RemovalFD()
	if fd < 0 {
		return func() {}, nil
	}
	p, err := fdwait.New(fdwait.Netpoll) // a wait for the tool's life: no thread
	if err != nil {
		return nil, fmt.Errorf("%s: watch device %s: %w", prog, devctx.Device().Name, err)
	}
	var stopped atomic.Bool
	go func() {
		if err := p.Wait(context.Background(), time.Time{}, fd); err != nil {
			return // stopped
		}
		time.Sleep(Grace)
		if stopped.Load() {
			return // the tool is closing the device itself
		}
		fmt.Fprintf(stderr, "%s: %v\n", prog, devctx.Err())
		os.Exit(1)
	}()
	return func() {
		stopped.Store(true)
		p.Close()
	}, nil
}
