package streamtest

import (
	"net"
	"testing"

	"golang.org/x/net/nettest"
)

// TestNettestConn runs x/net/nettest's net.Conn conformance suite over
// rsocket connections on real rxe.
func TestNettestConn(t *testing.T) {
	l, dial := endpoints(t)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		c1, c2, err = connect(l, dial)
		if err != nil {
			return nil, nil, nil, err
		}
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}
