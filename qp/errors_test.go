package qp

import (
	"errors"
	"net"
	"strings"
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

// A posting error names this package and still matches the rxe error it
// stands for: PostSend, PostRecv and SRQ.PostRecv turn each rxe value into
// qp's (ownError), and nothing else.
func TestPostErrorsAreThisPackages(t *testing.T) {
	for rxeErr, qpErr := range map[error]error{
		rxe.ErrQueueFull: ErrQueueFull, rxe.ErrTooManySGEs: ErrTooManySGEs, rxe.ErrInlineTooLong: ErrInlineTooLong,
		rxe.ErrInvalidWR: ErrInvalidWR, rxe.ErrAtomicAlign: ErrAtomicAlign, rxe.ErrAtomicSize: ErrAtomicSize,
		rxe.ErrOpNotSupported: ErrOpNotSupported, rxe.ErrOpcodeTransport: ErrOpcodeTransport,
		rxe.ErrMessageTooLong: ErrMessageTooLong, rxe.ErrSRQAttached: ErrSRQAttached,
	} {
		if got := ownError(rxeErr); got != qpErr {
			t.Errorf("ownError(%v) = %v, want %v", rxeErr, got, qpErr)
		}
		if !errors.Is(qpErr, rxeErr) || !strings.HasPrefix(qpErr.Error(), "qp: ") {
			t.Errorf("%q does not name qp or match %q", qpErr, rxeErr)
		}
	}
	other := errors.New("other")
	if ownError(nil) != nil || ownError(other) != other || ownError(ErrClosed) != ErrClosed {
		t.Error("ownError changed an error that is not an rxe posting error")
	}
}
