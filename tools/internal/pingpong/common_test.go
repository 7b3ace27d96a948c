package pingpong

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// The shared options: Min bounds -s and -r, a nil field is not handled,
// and -m takes only a path MTU.
func TestCommonFlags(t *testing.T) {
	var size, depth int
	var mtu uverbs.MTU
	f := CommonFlags{Size: &size, RxDepth: &depth, MTU: &mtu}
	if ok, err := f.Set('s', "0"); !ok || err != nil || size != 0 {
		t.Errorf("-s 0 with Min 0: handled %v, %v, size %d", ok, err, size)
	}
	f.Min = 1
	if ok, err := f.Set('r', "0"); !ok || err == nil {
		t.Errorf("-r 0 with Min 1: handled %v, %v", ok, err)
	}
	if ok, err := f.Set('m', "2048"); !ok || err != nil || mtu != uverbs.MTU2048 {
		t.Errorf("-m 2048: handled %v, %v, mtu %v", ok, err, mtu)
	}
	if _, err := f.Set('m', "1500"); !errors.Is(err, ErrUsage) {
		t.Errorf("-m 1500: %v, want ErrUsage", err)
	}
	if ok, _ := f.Set('c', ""); ok {
		t.Error("-c handled with no Validate field")
	}
	if ok, _ := f.Set('q', "1"); ok {
		t.Error("-q handled: it is no shared option")
	}
}
