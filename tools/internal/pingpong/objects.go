package pingpong

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/tools/internal/devwatch"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Objects are the verbs objects of one rc/uc/ud pingpong end and the one
// receive and one send request it posts over and over, as Open makes them;
// a nil field was not made (yet).
type Objects struct {
	Ctx  *uverbs.Context
	Ch   *cq.Channel // nil when polling
	PD   *uverbs.PD
	Buf  *uverbs.Buffer
	MR   *uverbs.MR
	CQ   *cq.CQ
	QP   *qp.QP
	AH   *qp.AH // UD only
	Recv [1]qp.RecvWR
	Send [1]qp.SendWR

	unwatch func()        // ends watchDevice's watch
	sge     [2]uverbs.SGE // the receive's and the send's
	msg     []byte        // the message: the buffer past the GRH area
}

// watchDevice makes the removal of Ctx's device end the process with the
// removal error (devwatch.Exit), wherever the tool waits; Close ends the
// watch.
func (o *Objects) watchDevice() error {
	stop, err := devwatch.Exit(o.Ctx, filepath.Base(os.Args[0]), os.Stderr)
	if err != nil {
		return err
	}
	o.unwatch = stop
	return nil
}

// Msg is the message in the buffer, as -c stamps and checks it.
func (o *Objects) Msg() []byte { return o.msg }

// PostRecv posts up to n receives, one call each as the C tools do, and
// returns how many went in.
func (o *Objects) PostRecv(n int) int {
	for i := range n {
		if o.QP.PostRecv(o.Recv[:]) != nil {
			return i
		}
	}
	return n
}

// PostSend posts the send request.
func (o *Objects) PostSend() error { return o.QP.PostSend(o.Send[:]) }

// Close releases what was made, in the C tools' order (QP, CQ, MR, AH, PD,
// channel, context, buffer), and reports every failure.
func (o *Objects) Close() error {
	var errs []error
	add := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("Couldn't %s: %w", what, err))
		}
	}
	if o.QP != nil {
		add("destroy QP", o.QP.Close())
	}
	if o.CQ != nil {
		add("destroy CQ", o.CQ.Close())
	}
	if o.MR != nil {
		add("deregister MR", o.MR.Close())
	}
	if o.AH != nil {
		add("destroy AH", o.AH.Close())
	}
	if o.PD != nil {
		add("deallocate PD", o.PD.Close())
	}
	if o.Ch != nil {
		add("destroy completion channel", o.Ch.Close())
	}
	if o.unwatch != nil {
		o.unwatch()
	}
	if o.Ctx != nil {
		add("release context", o.Ctx.Close())
	}
	if o.Buf != nil {
		add("free the buffer", o.Buf.Close())
	}
	return errors.Join(errs...)
}
