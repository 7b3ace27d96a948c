package main

import (
	"context"
	"errors"
	"net/netip"

	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/server"
)

// serveCM listens for RDMA CM connects on the server's address and port
// (RDMA CM's TCP port space, apart from the side channel's TCP listener)
// and serves them until ctx is done or the server closes. Without RDMA CM
// (no rdma_ucm, or a GID that maps no IPv4 address) it says so (with
// opts.Logf) and the side channel stays the only way in. The channel is closed when it is
// over.
func serveCM(ctx context.Context, srv *server.Server, port int, opts server.CMOptions) <-chan struct{} {
	logf := opts.Logf
	done := make(chan struct{})
	ip, ok := srv.CMAddr()
	if !ok {
		logf("no RDMA CM: GID %v maps no IPv4 address", srv.GID())
		close(done)
		return done
	}
	addr := netip.AddrPortFrom(ip, uint16(port)).String()
	l, err := rdmacm.Listen(ctx, addr, rdmacm.Options{})
	if err != nil {
		logf("no RDMA CM: %v", err)
		close(done)
		return done
	}
	logf("RDMA CM listening on %s", l.Addr())
	go func() {
		defer close(done)
		err := srv.ServeCM(ctx, l, opts)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, server.ErrClosed) {
			logf("RDMA CM: %v", err)
		}
	}()
	return done
}
