package uverbs

import (
	"errors"
	"strings"
	"testing"
)

// A missing feature matches ErrNotSupported and names the kernel that adds it.
func TestFeatureError(t *testing.T) {
	var err error = &FeatureError{Feature: "rereg_mr", Device: "rxe0", Since: "6.5"}
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("%v does not match ErrNotSupported", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "rereg_mr") || !strings.Contains(msg, "rxe0") || !strings.Contains(msg, "Linux 6.5") {
		t.Errorf("message %q lacks the feature, device or kernel", msg)
	}
	var fe *FeatureError
	if wrapped := errors.Join(errors.New("uverbs: rereg_mr: operation not supported"), err); !errors.As(wrapped, &fe) || fe.Since != "6.5" {
		t.Errorf("errors.As through a wrap: %v", fe)
	}
}
