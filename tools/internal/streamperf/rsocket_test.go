package streamperf

import (
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
)

// The rsocket options of a run: rings twice -B (rsocket doubles SO_SNDBUF
// and SO_RCVBUF), twice 512 KiB without it; inline none for 0, rsocket's
// default for a custom run (-1), else as given; -k in seconds; the iomap
// table riostream asks for; non-blocking calls (-T n, not -T a) poll for
// SpinTick; every wait on its thread.
func TestRSocketOptions(t *testing.T) {
	for _, tc := range []struct {
		n      RSocket
		o      Options
		inline int
		want   rsocket.Options
	}{
		{RSocket{}, Options{}, -1, rsocket.Options{SendBuffer: 1 << 20, RecvBuffer: 1 << 20}},
		{RSocket{}, Options{Buffer: 8192}, 0, rsocket.Options{SendBuffer: 16384, RecvBuffer: 16384, Inline: -1}},
		{RSocket{}, Options{Buffer: 65536, Keepalive: 30}, 64, rsocket.Options{SendBuffer: 131072, RecvBuffer: 131072, Inline: 64, Keepalive: 30 * time.Second}},
		{RSocket{IOMapSize: 1}, Options{}, -1, rsocket.Options{SendBuffer: 1 << 20, RecvBuffer: 1 << 20, IOMapSize: 1}},
		{RSocket{}, Options{DontWait: true}, -1, rsocket.Options{SendBuffer: 1 << 20, RecvBuffer: 1 << 20, PollTime: SpinTick}},
		{RSocket{}, Options{DontWait: true, Async: true}, -1, rsocket.Options{SendBuffer: 1 << 20, RecvBuffer: 1 << 20}},
	} {
		tc.want.ThreadWait = true
		if got := tc.n.options(&tc.o, tc.inline); got != tc.want {
			t.Errorf("%+v inline %d: %+v, want %+v", tc.o, tc.inline, got, tc.want)
		}
	}
}
