package qp

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// One sentinel per condition: whichever package returned a closed or
// not-supported error, errors.Is matches uverbs' sentinel, and the
// posting errors still match librxe's errno.
func TestOneSentinelPerCondition(t *testing.T) {
	for name, err := range map[string]error{"qp.ErrClosed": ErrClosed, "cq.ErrClosed": cq.ErrClosed} {
		if !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("%s does not match uverbs.ErrClosed", name)
		}
	}
	if !errors.Is(ErrClosed, unix.EBADF) {
		t.Error("qp.ErrClosed lost its EBADF")
	}
	if !errors.Is(ErrNotSupported, uverbs.ErrNotSupported) {
		t.Error("qp.ErrNotSupported does not match uverbs.ErrNotSupported")
	}
	if errors.Is(ErrQueueFull, uverbs.ErrClosed) {
		t.Error("ErrQueueFull matches uverbs.ErrClosed")
	}
}
