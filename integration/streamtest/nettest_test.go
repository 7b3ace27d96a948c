package streamtest

import (
	"net"
	"testing"

	"github.com/pureverbs/pureverbs/qp/rsocket"
	"golang.org/x/net/nettest"
)

// TestNettestConn runs x/net/nettest's net.Conn conformance suite over
// rsocket connections on real rxe, parked in the runtime poller and on
// their threads (ThreadWait).
func TestNettestConn(t *testing.T) {
	t.Run("netpoll", func(t *testing.T) { testNettestConn(t, rsocket.Options{}) })
	t.Run("thread", func(t *testing.T) { testNettestConn(t, rsocket.Options{ThreadWait: true}) })
}

func testNettestConn(t *testing.T, o rsocket.Options) {
	l, dial := endpoints(t, o)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		c1, c2, err = connect(l, dial)
		if err != nil {
			return nil, nil, nil, err
		}
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}
