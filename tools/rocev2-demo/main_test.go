package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// The demo takes the index rxe-link printed for the address, wherever the
// kernel put it, and refuses output without it.
func TestGIDIndexFromRxeLinkOutput(t *testing.T) {
	out := "rxd0 0 fe80::44fe:ceff:feda:135c vdemo0\nrxd0 1 fe80::44fe:ceff:feda:135c vdemo0\nrxd0 3 ::ffff:10.96.0.1 vdemo0\n"
	got, err := gidIndex(out, "rxd0", net.ParseIP("10.96.0.1"))
	if err != nil || got != "3" {
		t.Errorf("gidIndex = %q, %v; want 3", got, err)
	}
	if _, err := gidIndex(out, "rxd1", net.ParseIP("10.96.0.1")); err == nil || !strings.Contains(err.Error(), "rxd1") {
		t.Errorf("another device's lines: %v, want an error naming rxd1", err)
	}
	if _, err := gidIndex(out, "rxd0", net.ParseIP("10.96.0.2")); err == nil {
		t.Error("an address rxe-link did not print was found")
	}
}

// rocev2-server's summary as it prints it with -check; the tests below
// change the counts.
const serverSummary = `frames 61234, bytes 283000000 in 2.998 s: 20422 frames/s, 94.40 MB/s
channels 0:15309 1:15309 2:15308 3:15308
ring (shared, unknown size): 0 gaps (0 positions missing) ; 0 duplicates, 0 wraps
side channel: 1 senders connected, 0 exchanges failed (0 evicted to make room), 0 connections refused
rdma cm: 0 senders connected, 0 requests failed
completion errors [], flushed at disconnect 0, bad opcode 0, bad length 0, bad wr_id 0; posted 256 held 0 low-water 200; parked 3 times; senders 1
%s
`

const senderSummary = "rocev2-send: connected\nsent %d frames, 283000000 bytes in 3.001 s: 20404 frames/s, 94.30 MB/s\n"

// The demo passes only when every frame sent was counted, none lost, none
// out of order or duplicated, none corrupt; a server summary without the
// check's line (rocev2-server without -check, as make demo ran it) is an
// error, not a pass.
func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		checkLine string
		sent      int
		want      string // "" passes; else a piece of the error
	}{
		{"intact", "0 lost, 0 corrupt", 61234, ""},
		{"lost", "1 lost, 0 corrupt\nlost frames: 17", 61234, "1 lost"},
		{"corrupt", "0 lost, 2 corrupt", 61234, "2 corrupt"},
		{"out of order", "0 lost, 0 corrupt, 3 duplicate", 61234, "3 out of order or duplicated"},
		{"tail missing", "0 lost, 0 corrupt", 61240, "61234 frames counted of 61240 sent"},
		{"no check", "", 61234, "was it run with -check?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := readVerdict(fmt.Sprintf(serverSummary, tc.checkLine), fmt.Sprintf(senderSummary, tc.sent))
			if err == nil {
				if !strings.HasPrefix(v.rate, "frames 61234, ") {
					t.Errorf("rate line %q", v.rate)
				}
				err = v.check()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("verdict: %v; want a pass", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("verdict: %v; want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := readVerdict(fmt.Sprintf(serverSummary, "0 lost, 0 corrupt"), "rocev2-send: post send: EIO\n"); err == nil {
		t.Error("no sender summary: passed")
	}
	if v, err := readVerdict("0 lost, 0 corrupt\n", fmt.Sprintf(senderSummary, 0)); err == nil {
		if err := v.check(); err == nil {
			t.Error("no rate line and no frames: passed")
		}
	}
}
