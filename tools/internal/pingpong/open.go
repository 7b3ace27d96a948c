package pingpong

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// PickDevice is the named device, or the first one found.
func PickDevice(name string) (uverbs.Device, error) {
	devs, err := uverbs.Devices()
	if err != nil {
		return uverbs.Device{}, fmt.Errorf("Failed to get IB devices list: %w", err)
	}
	for _, d := range devs {
		if name == "" || d.Name == name {
			return d, nil
		}
	}
	if name == "" {
		return uverbs.Device{}, errors.New("No IB devices found")
	}
	return uverbs.Device{}, fmt.Errorf("IB device %s not found", name)
}

// Spec is what a tool's command line and transport say about the end Open
// makes.
type Spec struct {
	Options
	Type   qp.Type
	Access uverbs.Access // the MR's
	// GRHArea is room in front of the message for the GRH each received
	// datagram starts with (ud-pingpong's 40 bytes): receives take the
	// whole buffer, sends the message past the area.
	GRHArea int
	// QKey is a UD QP's Q_Key, set at INIT and carried by each send.
	QKey uint32
	// Opened, when set, runs once the device is open, where
	// ibv_ud_pingpong checks -s against the port's active MTU.
	Opened func(*uverbs.Context) error
	// CheckDevice, when set, runs once the PD exists, where
	// ibv_rc_pingpong checks the device for its options (-t).
	CheckDevice func(*uverbs.Context) error
}

// Open picks the device, then creates the buffer (GRHArea+Size bytes of
// 0x7b), context, completion channel (events mode), PD, MR, CQ
// (rx_depth+1 entries) and a QP of p.Type with one send and rx_depth
// receive slots, in the C tools' order, and moves the QP to INIT: with the
// Q_Key on UD, granting no remote access otherwise. Sends are inline when
// the device takes the whole message inline, as in the C tools. On
// failure everything made so far is released.
func Open(p Spec) (o *Objects, err error) {
	dev, err := PickDevice(p.IBDev)
	if err != nil {
		return nil, err
	}
	o = &Objects{}
	defer func() {
		if err != nil {
			err = errors.Join(err, o.Close())
			o = nil
		}
	}()
	if o.Buf, err = uverbs.NewBuffer(p.GRHArea+p.Size, uverbs.BufferOptions{}); err != nil {
		return o, fmt.Errorf("Couldn't allocate work buf.: %w", err)
	}
	b := o.Buf.Bytes()
	for i := range b {
		b[i] = 0x7b // the C tools' fill byte
	}
	o.msg = b[p.GRHArea:]
	if o.Ctx, err = uverbs.Open(dev); err != nil {
		return o, fmt.Errorf("Couldn't get context for %s: %w", dev.Name, err)
	}
	if err = o.watchDevice(); err != nil {
		return o, err
	}
	if p.Opened != nil {
		if err = p.Opened(o.Ctx); err != nil {
			return o, err
		}
	}
	if p.Events {
		if o.Ch, err = cq.NewChannel(o.Ctx); err != nil {
			return o, fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	if o.PD, err = o.Ctx.AllocPD(); err != nil {
		return o, fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	if p.CheckDevice != nil {
		if err = p.CheckDevice(o.Ctx); err != nil {
			return o, err
		}
	}
	if o.MR, err = o.PD.RegisterMR(o.Buf, p.Access); err != nil {
		return o, fmt.Errorf("Couldn't register MR: %w", err)
	}
	if o.CQ, err = cq.New(o.Ctx, p.RxDepth+1, o.Ch); err != nil {
		return o, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	o.QP, err = qp.New(o.PD, qp.Spec{
		Type:   p.Type,
		SendCQ: o.CQ,
		RecvCQ: o.CQ,
		Cap:    qp.Cap{MaxSendWR: 1, MaxRecvWR: uint32(p.RxDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return o, fmt.Errorf("Couldn't create QP: %w", err)
	}
	init := qp.Attr{State: qp.StateInit, PKeyIndex: 0, PortNum: p.IBPort}
	mask := qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort
	if p.Type == qp.UD {
		init.QKey, mask = p.QKey, mask|qp.AttrQKey
	} else {
		mask |= qp.AttrAccessFlags
	}
	if err = o.QP.Modify(&init, mask); err != nil {
		return o, fmt.Errorf("Failed to modify QP to INIT: %w", err)
	}
	if o.sge[0], err = o.MR.SGE(0, p.GRHArea+p.Size); err != nil {
		return o, err
	}
	if o.sge[1], err = o.MR.SGE(p.GRHArea, p.Size); err != nil {
		return o, err
	}
	o.Recv[0] = qp.RecvWR{ID: RecvWRID, SGEs: o.sge[:1]}
	o.Send[0] = qp.SendWR{ID: SendWRID, Opcode: qp.Send, Flags: qp.Signaled, SGEs: o.sge[1:], RemoteQKey: p.QKey}
	if o.QP.Cap().MaxInlineData >= uint32(p.Size) {
		o.Send[0].Flags |= qp.Inline
		o.Send[0].SGEs, o.Send[0].Inline = nil, o.msg
	}
	return o, nil
}
