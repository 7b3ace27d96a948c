package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

// TestSleepWatchdog: sleeps that end keep the watchdog quiet however many
// periods they span together; one sleep that lasts is woken after one to
// two periods, and the watchdog says it fired.
func TestSleepWatchdog(t *testing.T) {
	p, err := fdwait.New(fdwait.Ppoll)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	const period = 40 * time.Millisecond
	d := newSleepWatchdog(p, period)
	defer d.stop()
	sleep := func(data bool) error {
		if data {
			go func() { time.Sleep(5 * time.Millisecond); unix.Write(fds[1], []byte{1}) }()
		}
		d.begin()
		err := p.Wait(context.Background(), time.Time{}, fds[0])
		d.end()
		unix.Read(fds[0], make([]byte, 8))
		return err
	}
	for start := time.Now(); time.Since(start) < 5*period; {
		if err := sleep(true); err != nil {
			t.Fatalf("a sleep that ended: %v (watchdog fired %v)", err, d.fired.Load())
		}
	}
	start := time.Now()
	err = sleep(false)
	took := time.Since(start)
	if !errors.Is(err, fdwait.ErrWoken) || !d.fired.Load() || took < period/2 || took > 2*period+time.Second {
		t.Fatalf("a lasting sleep: %v after %v, watchdog fired %v; want ErrWoken after %v to %v", err, took, d.fired.Load(), period, 2*period)
	}
}
