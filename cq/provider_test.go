package cq

import (
	"reflect"
	"testing"

	"github.com/pureverbs/pureverbs/rxe"
)

// Every field of the provider's completion reaches cq's, value for value,
// so that a field added to one and not to WC.fill fails here.
func TestWCFill(t *testing.T) {
	var r rxe.WC
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(i + 1))
	}
	var w WC
	w.fill(&r)
	got := reflect.ValueOf(w)
	if got.NumField() != v.NumField() {
		t.Fatalf("cq.WC has %d fields, rxe.WC %d", got.NumField(), v.NumField())
	}
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if f := got.FieldByName(name); !f.IsValid() || f.Uint() != v.Field(i).Uint() {
			t.Errorf("WC.%s = %v, want %d", name, f, v.Field(i).Uint())
		}
	}
}

// The statuses, opcodes and flags are the provider's values, and print the
// IBV_WC_ names.
func TestProviderValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		cq, rx uint64
	}{
		{"Success", uint64(Success), uint64(rxe.WCSuccess)},
		{"LocLenErr", uint64(LocLenErr), uint64(rxe.WCLocLenErr)},
		{"LocQPOpErr", uint64(LocQPOpErr), uint64(rxe.WCLocQPOpErr)},
		{"LocProtErr", uint64(LocProtErr), uint64(rxe.WCLocProtErr)},
		{"WRFlushErr", uint64(WRFlushErr), uint64(rxe.WCWRFlushErr)},
		{"MWBindErr", uint64(MWBindErr), uint64(rxe.WCMWBindErr)},
		{"BadRespErr", uint64(BadRespErr), uint64(rxe.WCBadRespErr)},
		{"LocAccessErr", uint64(LocAccessErr), uint64(rxe.WCLocAccessErr)},
		{"RemInvReqErr", uint64(RemInvReqErr), uint64(rxe.WCRemInvReqErr)},
		{"RemAccessErr", uint64(RemAccessErr), uint64(rxe.WCRemAccessErr)},
		{"RemOpErr", uint64(RemOpErr), uint64(rxe.WCRemOpErr)},
		{"RetryExcErr", uint64(RetryExcErr), uint64(rxe.WCRetryExcErr)},
		{"RNRRetryExcErr", uint64(RNRRetryExcErr), uint64(rxe.WCRNRRetryExcErr)},
		{"FatalErr", uint64(FatalErr), uint64(rxe.WCFatalErr)},
		{"GeneralErr", uint64(GeneralErr), uint64(rxe.WCGeneralErr)},
		{"OpSend", uint64(OpSend), uint64(rxe.WCSend)},
		{"OpRDMAWrite", uint64(OpRDMAWrite), uint64(rxe.WCRDMAWrite)},
		{"OpRDMARead", uint64(OpRDMARead), uint64(rxe.WCRDMARead)},
		{"OpCompSwap", uint64(OpCompSwap), uint64(rxe.WCCompSwap)},
		{"OpFetchAdd", uint64(OpFetchAdd), uint64(rxe.WCFetchAdd)},
		{"OpBindMW", uint64(OpBindMW), uint64(rxe.WCBindMW)},
		{"OpLocalInv", uint64(OpLocalInv), uint64(rxe.WCLocalInv)},
		{"OpFlush", uint64(OpFlush), uint64(rxe.WCFlush)},
		{"OpAtomicWrite", uint64(OpAtomicWrite), uint64(rxe.WCAtomicWrite)},
		{"OpRecv", uint64(OpRecv), uint64(rxe.WCRecv)},
		{"OpRecvRDMAWithImm", uint64(OpRecvRDMAWithImm), uint64(rxe.WCRecvRDMAWithImm)},
		{"GRH", uint64(GRH), uint64(rxe.WCGRH)},
		{"WithImm", uint64(WithImm), uint64(rxe.WCWithImm)},
		{"WithInvalidate", uint64(WithInvalidate), uint64(rxe.WCWithInvalidate)},
	} {
		if c.cq != c.rx {
			t.Errorf("cq.%s = %d, the provider's is %d", c.name, c.cq, c.rx)
		}
	}
	if OpSend.String() != "WC_SEND" || OpRecv.String() != "WC_RECV" || WRFlushErr.String() != "WR_FLUSH_ERR" {
		t.Errorf("names: %v %v %v", OpSend, OpRecv, WRFlushErr)
	}
	if !OpRecvRDMAWithImm.IsRecv() || OpRDMARead.IsRecv() {
		t.Error("IsRecv")
	}
}

// BenchmarkWCFill is the conversion Poll adds per completion.
func BenchmarkWCFill(b *testing.B) {
	r := rxe.WC{WRID: 1, Status: rxe.WCSuccess, Opcode: rxe.WCRecv, ByteLen: 64, QPNum: 17, Flags: rxe.WCWithImm, Imm: 5}
	var w WC
	b.ReportAllocs()
	for b.Loop() {
		w.fill(&r)
	}
	if w.WRID != 1 {
		b.Fatal(w.WRID)
	}
}
