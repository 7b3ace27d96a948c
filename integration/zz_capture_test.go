//go:build integration

package integration

import (
	"strconv"
	"testing"
	"time"
)

func TestZZCapture(t *testing.T) {
	devs := devices(t, 2)
	port := 18700
	for _, c := range [][]string{
		{"ib_send_bw", "-n", "50", "-s", "4096"},
		{"ib_write_bw", "-n", "50", "-s", "4096", "-q", "2"},
		{"ib_read_bw", "-n", "50", "-s", "64"},
		{"ib_atomic_bw", "-n", "50"},
		{"ib_send_lat", "-n", "50"},
		{"ib_write_lat", "-n", "50"},
		{"ib_read_lat", "-n", "50"},
		{"ib_atomic_lat", "-n", "50"},
		{"ib_send_bw", "-n", "50", "-s", "64", "-c", "UD"},
		{"ib_write_bw", "-n", "20", "-b", "-s", "64"},
		{"ib_send_lat", "-n", "20", "-a", "-c", "UC"},
		{"ib_write_bw", "-D", "2", "-s", "64"},
		{"ib_send_lat", "-D", "2", "-s", "64"},
		{"ib_send_bw", "-n", "50", "-s", "64", "-e", "--report_gbits"},
	} {
		port++
		p := strconv.Itoa(port)
		srv := startPeer(t, time.Minute, c[0], append([]string{ "-d", devs[0], "-x", "1", "-F", "-p", p}, c[1:]...)...)
		waitListening(t, srv, port, 20*time.Second)
		cli := startPeer(t, time.Minute, c[0], append(append([]string{ "-d", devs[1], "-x", "1", "-F", "-p", p}, c[1:]...), "10.99.0.1")...)
		<-cli.done
		<-srv.done
		t.Logf("==== %v\n---- SERVER (err %v)\n%s\n---- CLIENT (err %v)\n%s", c, srv.err, srv.out.String(), cli.err, cli.out.String())
	}
}
