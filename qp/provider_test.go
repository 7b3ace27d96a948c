package qp

import (
	"errors"
	"reflect"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// The values qp defines are the provider's and the kernel ABI layer's, so
// that PostSend's conversion is a plain copy.
func TestProviderValues(t *testing.T) {
	for _, c := range []struct {
		name    string
		qp, rxe uint64
	}{
		{"RDMAWrite", uint64(RDMAWrite), uint64(rxe.OpRDMAWrite)},
		{"RDMAWriteWithImm", uint64(RDMAWriteWithImm), uint64(rxe.OpRDMAWriteWithImm)},
		{"Send", uint64(Send), uint64(rxe.OpSend)},
		{"SendWithImm", uint64(SendWithImm), uint64(rxe.OpSendWithImm)},
		{"RDMARead", uint64(RDMARead), uint64(rxe.OpRDMARead)},
		{"AtomicCmpAndSwp", uint64(AtomicCmpAndSwp), uint64(rxe.OpAtomicCmpAndSwp)},
		{"AtomicFetchAndAdd", uint64(AtomicFetchAndAdd), uint64(rxe.OpAtomicFetchAndAdd)},
		{"LocalInv", uint64(LocalInv), uint64(rxe.OpLocalInv)},
		{"BindMW", uint64(BindMW), uint64(rxe.OpBindMW)},
		{"SendWithInv", uint64(SendWithInv), uint64(rxe.OpSendWithInv)},
		{"Flush", uint64(Flush), uint64(rxe.OpFlush)},
		{"AtomicWrite", uint64(AtomicWrite), uint64(rxe.OpAtomicWrite)},
		{"Fence", uint64(Fence), uint64(rxe.Fence)},
		{"Signaled", uint64(Signaled), uint64(rxe.Signaled)},
		{"Solicited", uint64(Solicited), uint64(rxe.Solicited)},
		{"Inline", uint64(Inline), uint64(rxe.Inline)},
		{"FlushGlobal", uint64(FlushGlobal), uint64(rxe.FlushGlobal)},
		{"FlushPersistent", uint64(FlushPersistent), uint64(rxe.FlushPersistent)},
		{"FlushRange", uint64(FlushRange), uint64(rxe.FlushRange)},
		{"FlushMR", uint64(FlushMR), uint64(rxe.FlushMR)},
		{"StateReset", uint64(StateReset), uint64(uverbs.QPStateReset)},
		{"StateInit", uint64(StateInit), uint64(uverbs.QPStateInit)},
		{"StateRTR", uint64(StateRTR), uint64(uverbs.QPStateRTR)},
		{"StateRTS", uint64(StateRTS), uint64(uverbs.QPStateRTS)},
		{"StateSQD", uint64(StateSQD), uint64(uverbs.QPStateSQD)},
		{"StateSQE", uint64(StateSQE), uint64(uverbs.QPStateSQE)},
		{"StateError", uint64(StateError), uint64(uverbs.QPStateError)},
		{"RC", uint64(RC), uint64(uverbs.QPTypeRC)},
		{"UC", uint64(UC), uint64(uverbs.QPTypeUC)},
		{"UD", uint64(UD), uint64(uverbs.QPTypeUD)},
	} {
		if c.qp != c.rxe {
			t.Errorf("qp.%s = %d, the provider's is %d", c.name, c.qp, c.rxe)
		}
	}
}

// setEvery gives every field of the struct v points to a distinct non-zero
// value (recursing into structs); pointers get p.
func setEvery(t *testing.T, v reflect.Value, p any, n *int) {
	for i := range v.NumField() {
		f := v.Field(i)
		*n++
		switch f.Kind() {
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(*n))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Struct:
			setEvery(t, f, p, n)
		case reflect.Pointer:
			f.Set(reflect.ValueOf(p))
		default:
			t.Fatalf("field %s of kind %v: extend setEvery", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// sameFields checks that every field of got (recursively) equals the field
// of the same name in want, compared as numbers, slices by identity.
func sameFields(t *testing.T, path string, want, got reflect.Value) {
	for i := range want.NumField() {
		name := want.Type().Field(i).Name
		w, g := want.Field(i), got.FieldByName(name)
		if !g.IsValid() {
			t.Errorf("%s%s has no counterpart", path, name)
			continue
		}
		switch w.Kind() {
		case reflect.Struct:
			sameFields(t, path+name+".", w, g)
		case reflect.Slice:
			if w.Pointer() != g.Pointer() || w.Len() != g.Len() {
				t.Errorf("%s%s: slice not handed over", path, name)
			}
		case reflect.Pointer:
			if g.IsNil() {
				t.Errorf("%s%s: not handed over", path, name)
			}
		default:
			if w.Uint() != g.Uint() {
				t.Errorf("%s%s = %d, want %d", path, name, g.Uint(), w.Uint())
			}
		}
	}
}

// Every field of a SendWR reaches the provider's request, so that a field
// added to one and not the conversion fails here.
func TestSendWRFill(t *testing.T) {
	var wr SendWR
	n := 0
	setEvery(t, reflect.ValueOf(&wr).Elem(), &AH{core: &rxe.AH{}}, &n)
	var r rxe.SendWR
	wr.fill(&r)
	sameFields(t, "SendWR.", reflect.ValueOf(wr), reflect.ValueOf(r))
	if r.AH != wr.AH.core {
		t.Error("AH: the provider's AH is not the one qp.AH wraps")
	}
	if reflect.TypeFor[SendWR]().NumField() != reflect.TypeFor[rxe.SendWR]().NumField() {
		t.Error("qp.SendWR and rxe.SendWR have different fields")
	}
	if reflect.TypeFor[RecvWR]().ConvertibleTo(reflect.TypeFor[rxe.RecvWR]()) == false {
		t.Error("qp.RecvWR no longer converts to rxe.RecvWR")
	}
}

// A request's opcode and a completion's never print the same name.
func TestOpcodeNamesDistinct(t *testing.T) {
	send := map[string]SendOpcode{}
	for op := range SendOpcode(16) {
		send[op.String()] = op
	}
	for op := range cq.Opcode(130) {
		if s, dup := send[op.String()]; dup {
			t.Errorf("cq.Opcode(%d) and qp.SendOpcode(%d) both print %q", op, s, op.String())
		}
	}
	if Send.String() != "WR_SEND" || cq.OpSend.String() != "WC_SEND" || StateError.String() != "ERR" || RC.String() != "RC" {
		t.Errorf("names: %v %v %v %v", Send, cq.OpSend, StateError, RC)
	}
}

// The zero GID entry is refused wherever a path needs a source GID: it is
// never taken for index 0, the IPv6 link-local GID. A port that is not the
// entry's is refused too.
func TestSourceGIDRequired(t *testing.T) {
	peer := uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 15: 2}
	q := openSimQP(t)
	q.state.Store(uint32(StateInit))
	if err := q.ToRTR(RTRParams{DestQPN: 5, DGID: peer}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ToRTR without SGID = %v, want EINVAL", err)
	}
	if err := q.Connect(Peer{QPN: 5, GID: peer}, ConnectOptions{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Connect without SGID = %v, want EINVAL", err)
	}
	if _, err := NewAH(nil, AHSpec{DGID: peer}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("NewAH without SGID = %v, want EINVAL", err)
	}
	e := uverbs.GIDEntry{GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 15: 1}, Index: 1, Port: 1}
	if idx, port, err := sourceGID("test", e, 0); err != nil || idx != 1 || port != 1 {
		t.Errorf("sourceGID(%+v) = %d, %d, %v", e, idx, port, err)
	}
	if _, _, err := sourceGID("test", e, 2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("entry of port 1 used on port 2: %v", err)
	}
	e.Index = 256
	if _, _, err := sourceGID("test", e, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("index 256: %v", err)
	}
}

// BenchmarkSendWRFill is the conversion PostSend adds per request: one
// qp.SendWR written into the provider's request.
func BenchmarkSendWRFill(b *testing.B) {
	sges := []uverbs.SGE{{Addr: 1, Length: 64, LKey: 2}}
	wr := SendWR{ID: 1, Opcode: SendWithImm, Flags: Signaled, Imm: 7, SGEs: sges, RemoteAddr: 9, RKey: 3}
	var r rxe.SendWR
	b.ReportAllocs()
	for b.Loop() {
		wr.fill(&r)
	}
	if r.ID != 1 {
		b.Fatal(r.ID)
	}
}
