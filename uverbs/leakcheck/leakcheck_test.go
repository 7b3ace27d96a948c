package leakcheck

import (
	"strings"
	"testing"
	"time"
)

type resource struct{ _ [16]byte }

// A watched object dropped without Closed has its release run and is
// reported with the stack that created it (tracing on); one whose Closed
// was called is neither released nor reported.
func TestObject(t *testing.T) {
	Trace(true)
	defer Trace(false)
	Take()
	released := make(chan int, 2)
	func() {
		Object(new(resource), "dropped resource", func(n int) { released <- n }, 1)
		Object(new(resource), "closed resource", func(n int) { released <- n }, 2).Closed()
	}()
	got := Collect(2 * time.Second)
	if len(got) != 1 || got[0].What != "dropped resource" {
		t.Fatalf("leaks = %v, want the dropped resource only", got)
	}
	if !strings.Contains(got[0].Created, "leakcheck.TestObject") {
		t.Errorf("creation stack %q does not name the test", got[0].Created)
	}
	if !strings.Contains(got[0].String(), "dropped resource, created at\n") {
		t.Errorf("String() = %q", got[0].String())
	}
	select {
	case n := <-released:
		if n != 1 {
			t.Fatalf("released resource %d", n)
		}
	default:
		t.Fatal("the dropped resource was not released")
	}
	if len(released) != 0 {
		t.Fatal("the closed resource was released")
	}
}

// Without tracing nothing is recorded at creation, and the leak says so.
func TestObjectUntraced(t *testing.T) {
	Take()
	func() { Object(new(resource), "untraced", (func(struct{}))(nil), struct{}{}) }()
	got := Collect(2 * time.Second)
	if len(got) != 1 || got[0].Created != "" || !strings.HasSuffix(got[0].String(), "(creation not traced)") {
		t.Fatalf("leaks = %v", got)
	}
}
