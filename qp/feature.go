package qp

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
)

// The 6.2 opcodes' probes: the capability bits the device advertises, which
// are also what PostSend checks before it posts AtomicWrite or Flush.
const opsSince = "6.2"

// HaveAtomicWrite reports whether devctx's device executes AtomicWrite
// requests (rdma_rxe: Linux 6.2 and later): nil, or a *uverbs.FeatureError
// (errors.Is ErrNotSupported). Without it PostSend refuses AtomicWrite with
// ErrOpNotSupported.
func HaveAtomicWrite(devctx *uverbs.Context) error {
	return haveCap(devctx, "ATOMIC_WRITE", uverbs.DeviceCapAtomicWrite)
}

// HaveFlush reports whether devctx's device executes Flush requests of
// placement type t (rdma_rxe: Linux 6.2 and later; FlushPersistent only
// for persistent memory): nil, or a *uverbs.FeatureError (errors.Is
// ErrNotSupported). Without it PostSend refuses such a Flush with
// ErrOpNotSupported.
func HaveFlush(devctx *uverbs.Context, t FlushType) error {
	switch t {
	case FlushGlobal:
		return haveCap(devctx, "FLUSH (global)", uverbs.DeviceCapFlushGlobal)
	case FlushPersistent:
		return haveCap(devctx, "FLUSH (persistent)", uverbs.DeviceCapFlushPersistent)
	}
	return fmt.Errorf("qp: probe flush: placement type %#x: %w", uint8(t), ErrInvalidWR)
}

// haveCap checks one capability bit of the device.
func haveCap(devctx *uverbs.Context, feature string, bit uint64) error {
	attr, err := devctx.QueryDevice()
	if err != nil {
		return fmt.Errorf("qp: probe %s: %w", feature, err)
	}
	if attr.DeviceCapFlags&bit == 0 {
		return &uverbs.FeatureError{Feature: feature, Device: devctx.Device().Name, Since: opsSince}
	}
	return nil
}
