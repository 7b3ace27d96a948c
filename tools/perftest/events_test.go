package main

import (
	"testing"
	"time"
)

// TestSleepDeadline: sleeps share a deadline, reading the clock once per
// sleepsPerDeadline of them, and a renewed deadline starts a new run.
func TestSleepDeadline(t *testing.T) {
	var clock int64
	reads := 0
	read := func() int64 { reads++; return clock }
	var d sleepDeadline
	at, fresh := d.next(read)
	if !fresh || at != epoch.Add(stallLimit) || reads != 1 {
		t.Fatalf("first sleep: %v fresh %v after %d clock reads", at.Sub(epoch), fresh, reads)
	}
	for i := 1; i < sleepsPerDeadline; i++ {
		clock += int64(time.Millisecond)
		if got, fresh := d.next(read); fresh || got != at {
			t.Fatalf("sleep %d: %v fresh %v, want the first sleep's deadline", i, got.Sub(epoch), fresh)
		}
	}
	if reads != 1 {
		t.Fatalf("%d sleeps read the clock %d times, want once", sleepsPerDeadline, reads)
	}
	if got, fresh := d.next(read); !fresh || got != epoch.Add(time.Duration(clock)+stallLimit) {
		t.Fatalf("sleep %d: %v fresh %v, want a new deadline", sleepsPerDeadline, got.Sub(epoch), fresh)
	}
	clock += int64(time.Second)
	renewed := d.renew(read)
	if renewed != epoch.Add(time.Duration(clock)+stallLimit) {
		t.Fatalf("renew: %v", renewed.Sub(epoch))
	}
	for i := 1; i < sleepsPerDeadline; i++ {
		if got, fresh := d.next(read); fresh || got != renewed {
			t.Fatalf("sleep %d after renew: %v fresh %v, want the renewed deadline", i, got.Sub(epoch), fresh)
		}
	}
	if _, fresh := d.next(read); !fresh {
		t.Fatalf("sleep %d after renew shares its deadline", sleepsPerDeadline)
	}
}
