package rdmacm

import (
	"fmt"
	"sync"

	"github.com/pureverbs/pureverbs/uverbs"
)

// devices shares one uverbs.Context per RDMA device among the connections
// of the process, as librdmacm opens each device once: the context of the
// device a CM id is bound to, found by its node GUID, opened on first use
// and closed when its last connection has let go of it.
var devices = deviceTable{open: map[uint64]*device{}}

type deviceTable struct {
	mu   sync.Mutex
	open map[uint64]*device
}

// device is a shared context and the number of holders.
type device struct {
	guid uint64
	ctx  *uverbs.Context
	refs int
}

// acquire returns the context of the device with node GUID guid, opening
// it if no one holds it.
func (t *deviceTable) acquire(guid uint64) (*device, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.open[guid]; d != nil {
		d.refs++
		return d, nil
	}
	if guid == 0 {
		return nil, fmt.Errorf("rdmacm: the CM id is bound to no RDMA device")
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return nil, err
	}
	for _, dv := range devs {
		if dv.NodeGUID != guid {
			continue
		}
		ctx, err := uverbs.Open(dv)
		if err != nil {
			return nil, err
		}
		d := &device{guid: guid, ctx: ctx, refs: 1}
		t.open[guid] = d
		return d, nil
	}
	return nil, fmt.Errorf("rdmacm: no uverbs device has node GUID %016x (the CM bound the id to it)", guid)
}

// release drops one hold; the last closes the context and returns what
// that Close returned.
func (t *deviceTable) release(d *device) error {
	if d == nil {
		return nil
	}
	t.mu.Lock()
	d.refs--
	last := d.refs == 0
	if last {
		delete(t.open, d.guid)
	}
	t.mu.Unlock()
	if !last {
		return nil
	}
	if err := d.ctx.Close(); err != nil {
		return fmt.Errorf("rdmacm: close the context of %s: %w", d.ctx.Device().Name, err)
	}
	return nil
}
