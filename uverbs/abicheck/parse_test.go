package abicheck

import (
	"reflect"
	"testing"
)

const sample = `
/* a comment with struct fake { int x; }; inside */
#define FOO(x) \
	(x)
struct inner { __u32 a; __u16 b[2]; };
struct outer {
	__aligned_u64 wr_id;	// trailing comment
	union {
		__be32 imm_data;
		__u32 invalidate_rkey;
	} ex;
	union {
		struct { __u32 x; } one;
		struct inner two;
	} wr;
	union {
		struct sockaddr_in _in;
		struct sockaddr_in6 _in6;
	} sgid_addr, dgid_addr;
	__u8 reserved[6] __attribute__((aligned(8)));
	union {
		__DECLARE_FLEX_ARRAY(__u8, inline_data);
		__DECLARE_FLEX_ARRAY(struct rxe_sge, sge);
	};
	__u8 data[];
};
`

func names(ms []*member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.name)
	}
	return out
}

// The parser finds the member names the uapi headers declare, through
// nesting, anonymous unions, several declarators, attributes and macros.
func TestParseHeader(t *testing.T) {
	defs := parseHeader(sample)
	if _, ok := defs["struct fake"]; ok {
		t.Error("a struct inside a comment was parsed")
	}
	outer := defs["struct outer"]
	if outer == nil {
		t.Fatalf("struct outer not found in %v", defs)
	}
	want := []string{"wr_id", "ex", "wr", "sgid_addr", "dgid_addr", "reserved", "inline_data", "sge", "data"}
	if got := names(outer.members(defs)); !reflect.DeepEqual(got, want) {
		t.Errorf("members = %q, want %q", got, want)
	}
	if m := outer.lookup("wr.two.b", defs); m == nil || m.name != "b" {
		t.Errorf("wr.two.b through struct inner: %v", m)
	}
	if m := outer.lookup("ex.invalidate_rkey", defs); m == nil {
		t.Error("ex.invalidate_rkey not found")
	}
	if m := outer.child("WrID", defs); m == nil || m.name != "wr_id" {
		t.Errorf("WrID matched %v, want wr_id", m)
	}
	if m := outer.child("wrid", defs); m == nil || m.name != "wr_id" {
		t.Errorf("wrid matched %v, want wr_id", m)
	}
	if outer.child("wr_idx", defs) != nil || outer.lookup("wr.three", defs) != nil {
		t.Error("a member that does not exist was found")
	}
}
