package qp

import (
	"errors"
	"net"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// One value per condition: every package's ErrClosed is uverbs.ErrClosed
// and every ErrNotSupported is uverbs.ErrNotSupported, so that errors.Is
// matches whichever a caller compares with; a caller's mistake never
// matches ErrNotSupported; the posting errors still match librxe's errno.
func TestOneSentinelPerCondition(t *testing.T) {
	for name, err := range map[string]error{"qp": ErrClosed, "cq": cq.ErrClosed, "rxe": rxe.ErrClosed} {
		if err != uverbs.ErrClosed {
			t.Errorf("%s.ErrClosed is not uverbs.ErrClosed", name)
		}
	}
	if uverbs.ErrClosed != net.ErrClosed || uverbs.ErrNotSupported != errors.ErrUnsupported {
		t.Error("the two sentinels are not net.ErrClosed and errors.ErrUnsupported")
	}
	for name, err := range map[string]error{"qp": ErrNotSupported, "rxe": rxe.ErrNotSupported} {
		if err != uverbs.ErrNotSupported {
			t.Errorf("%s.ErrNotSupported is not uverbs.ErrNotSupported", name)
		}
	}
	for name, err := range map[string]error{
		"ErrSRQAttached": ErrSRQAttached, "ErrInvalidWR": ErrInvalidWR, "ErrBadState": ErrBadState,
		"ErrAtomicAlign": ErrAtomicAlign, "ErrOpcodeTransport": ErrOpcodeTransport,
	} {
		if errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: a caller's mistake must match EINVAL and not ErrNotSupported", name)
		}
	}
	if !errors.Is(ErrOpNotSupported, ErrNotSupported) || !errors.Is(ErrOpNotSupported, unix.EOPNOTSUPP) {
		t.Error("ErrOpNotSupported does not match ErrNotSupported and EOPNOTSUPP")
	}
	if !errors.Is(ErrQueueFull, unix.ENOMEM) || errors.Is(ErrQueueFull, ErrClosed) {
		t.Error("ErrQueueFull must match ENOMEM only")
	}
}
