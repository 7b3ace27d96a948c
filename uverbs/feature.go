package uverbs

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Feature probes say before the first use whether the kernel and the device
// have an optional feature, instead of "try and see": HaveReregMR here,
// qp.HaveAtomicWrite and qp.HaveFlush for the 6.2 opcodes. A probe returns
// nil if the feature is there, a *FeatureError (errors.Is ErrNotSupported)
// naming the feature and the kernel that added it to rdma_rxe if it is not,
// and any other error if it could not tell.

// FeatureError reports an optional feature the kernel or the device lacks.
// It matches ErrNotSupported.
type FeatureError struct {
	Feature string // what is missing, e.g. "rereg_mr", "ATOMIC_WRITE"
	Device  string // the device asked, e.g. "rxe0"
	Since   string // the Linux version whose rdma_rxe has it, e.g. "6.2"
}

// Error names the feature, the device and the kernel that adds it.
func (e *FeatureError) Error() string {
	return fmt.Sprintf("uverbs: %s not supported by %s (rdma_rxe has it from Linux %s on)", e.Feature, e.Device, e.Since)
}

// Unwrap makes errors.Is(err, ErrNotSupported) true.
func (e *FeatureError) Unwrap() error { return ErrNotSupported }

// reregSince is the kernel whose rdma_rxe implements rereg_user_mr (the
// PD and access cases; translation changes it refuses on every version).
const reregSince = "6.5"

// The outcome of the rereg_mr probe, per device name: the kernel is the
// same for every context of the process, a probe creates kernel objects,
// so only a conclusive answer (nil or a *FeatureError) is kept.
var reregProbe struct {
	mu   sync.Mutex
	seen map[string]error
}

// HaveReregMR reports whether MR.Rereg works on c's device (rdma_rxe has
// rereg_mr from Linux 6.5 on): nil, or a *FeatureError. The first call per
// device re-registers a one-page region in a PD of its own, and closes both.
func HaveReregMR(c *Context) error {
	name := c.Device().Name
	reregProbe.mu.Lock()
	defer reregProbe.mu.Unlock()
	if err, ok := reregProbe.seen[name]; ok {
		return err
	}
	err := probeRereg(c)
	var fe *FeatureError
	if err == nil || errors.As(err, &fe) {
		if reregProbe.seen == nil {
			reregProbe.seen = make(map[string]error)
		}
		reregProbe.seen[name] = err
	}
	return err
}

// probeRereg changes the access of a fresh region, as a program would.
func probeRereg(c *Context) (err error) {
	pd, err := c.AllocPD()
	if err != nil {
		return fmt.Errorf("uverbs: probe rereg_mr: %w", err)
	}
	defer func() { err = errors.Join(err, pd.Close()) }()
	buf, err := NewBuffer(unix.Getpagesize(), BufferOptions{})
	if err != nil {
		return fmt.Errorf("uverbs: probe rereg_mr: %w", err)
	}
	defer func() { err = errors.Join(err, buf.Close()) }()
	mr, err := pd.RegisterMR(buf, AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("uverbs: probe rereg_mr: %w", err)
	}
	defer func() { err = errors.Join(err, mr.Close()) }()
	access := AccessLocalWrite | AccessRemoteWrite
	return mr.Rereg(nil, &access)
}
