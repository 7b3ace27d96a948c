//go:build integration

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

// waitEvent waits up to limit for the next async event of ctx.
func waitEvent(t testing.TB, c *uverbs.Context, limit time.Duration) (uverbs.AsyncEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return c.WaitAsyncEvent(ctx)
}

// noEvent checks that no async event arrives for a moment.
func noEvent(t testing.TB, c *uverbs.Context, what string) {
	t.Helper()
	if ev, err := waitEvent(t, c, 300*time.Millisecond); err == nil {
		t.Errorf("%s: unexpected event %v", what, ev)
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: %v", what, err)
	}
}
