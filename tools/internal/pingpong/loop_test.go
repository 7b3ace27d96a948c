package pingpong

import (
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

func TestMTUFromBytes(t *testing.T) {
	for n, want := range map[int]uverbs.MTU{256: uverbs.MTU256, 512: uverbs.MTU512, 1024: uverbs.MTU1024,
		2048: uverbs.MTU2048, 4096: uverbs.MTU4096, 0: 0, 1500: 0, 8192: 0, 128: 0} {
		if got := MTUFromBytes(n); got != want {
			t.Errorf("MTUFromBytes(%d) = %v, want %v", n, got, want)
		}
	}
}
