//go:build integration

package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// Go against C both ways, and Go against Go, for ibv_uc_pingpong and
// ibv_ud_pingpong: polling and events, non-default sizes, counts, receive
// depths, ports and (UC) path MTUs, -c, and the defaults. Every peer runs
// under a deadline (a lost UC/UD packet stalls an exchange for good: a UC
// path MTU of 2048 on the 1500-byte veth does that to C and Go alike, as
// every packet is dropped).
func TestUCPingpong(t *testing.T) {
	const c, g = "ibv_uc_pingpong", "uc-pingpong"
	for _, tc := range []struct {
		name string
		r    pingpongRun
	}{
		{"GoClientCServer/poll", pingpongRun{server: c, client: g, size: 8192, iters: 200, mtu: 256, port: 18710}},
		{"GoClientCServer/events", pingpongRun{server: c, client: g, size: 100, iters: 150, rxDepth: 8, port: 18711, serverEvents: true, clientEvents: true}},
		{"CClientGoServer/poll", pingpongRun{server: g, client: c, size: 16384, iters: 40, mtu: 512, rxDepth: 4, port: 18712, validate: true}},
		{"CClientGoServer/events", pingpongRun{server: g, client: c, size: 1, iters: 300, port: 18713, serverEvents: true, clientEvents: true}},
		{"GoGo/mixed", pingpongRun{server: g, client: g, size: 4096, iters: 100, mtu: 1024, rxDepth: 2, port: 18714, clientEvents: true, validate: true}},
		{"GoGo/defaults", pingpongRun{server: g, client: g}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := tc.r.run(t, 2*time.Minute)
			tc.r.checkPair(t, srv, cli)
		})
	}
}

func TestUDPingpong(t *testing.T) {
	const c, g = "ibv_ud_pingpong", "ud-pingpong"
	for _, tc := range []struct {
		name string
		r    pingpongRun
	}{
		{"GoClientCServer/poll", pingpongRun{server: c, client: g, size: 1024, iters: 300, port: 18720}},
		{"GoClientCServer/events", pingpongRun{server: c, client: g, size: 64, iters: 150, rxDepth: 8, port: 18721, serverEvents: true, clientEvents: true}},
		{"CClientGoServer/poll", pingpongRun{server: g, client: c, size: 1000, iters: 200, rxDepth: 4, port: 18722, validate: true}},
		{"CClientGoServer/events", pingpongRun{server: g, client: c, size: 1, iters: 300, port: 18723, serverEvents: true, clientEvents: true}},
		{"GoGo/mixed", pingpongRun{server: g, client: g, size: 512, iters: 100, rxDepth: 2, port: 18724, clientEvents: true, validate: true}},
		{"GoGo/defaults", pingpongRun{server: g, client: g, size: 1024}}, // size as the default, for the summary check
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := tc.r.run(t, 2*time.Minute)
			tc.r.checkPair(t, srv, cli)
			for _, side := range []struct{ tool, out string }{{tc.r.server, srv}, {tc.r.client, cli}} {
				if !strings.Contains(side.out, "PSN 0x") || !strings.Contains(side.out, ": GID ::ffff:") {
					t.Errorf("%s's local address line is not ibv_ud_pingpong's (\"PSN 0x...: GID\"):\n%s", side.tool, side.out)
				}
			}
		})
	}
}

// Both UD tools refuse a message larger than the port's active MTU (1024
// on the 1500-byte veth) before any exchange, with the same words; the Go
// tools print the C tools' usage for what the C tools refuse.
func TestUCUDPingpongRefusals(t *testing.T) {
	dev := devices(t, 1)[0]
	for _, tool := range []string{"ibv_ud_pingpong", "ud-pingpong"} {
		p := startPeer(t, 30*time.Second, tool, "-d", dev, "-g", gidArg(t, dev), "-s", "1025", "-p", "18799", "10.99.0.1")
		<-p.done
		if out := p.out.String(); p.err == nil || !strings.Contains(out, "Requested size larger than port MTU (1024)") {
			t.Errorf("%s -s 1025: err %v:\n%s", tool, p.err, out)
		}
	}
	for _, tc := range []struct {
		tool string
		args []string
		want string
	}{
		{"uc-pingpong", []string{"-m", "1500"}, "-m, --mtu=<size>"},
		{"uc-pingpong", []string{"-x"}, "-c, --chk"},
		{"uc-pingpong", []string{"a", "b"}, "-g, --gid-idx"},
		{"ud-pingpong", []string{"-m", "1024"}, "(default 2048)"}, // ibv_ud_pingpong has no -m
		{"ud-pingpong", []string{"-p", "70000"}, "-r, --rx-depth=<dep>"},
	} {
		p := startPeer(t, 30*time.Second, tc.tool, tc.args...)
		<-p.done
		if out := p.out.String(); p.err == nil || !strings.Contains(out, "Usage:") || !strings.Contains(out, tc.want) {
			t.Errorf("%s %q: err %v, output:\n%s", tc.tool, tc.args, p.err, out)
		}
	}
}

// Without -g neither UD tool has a GID to put in the AH, and RoCE has no
// path without one: the server fails to create its AH ("Failed to create
// AH") whichever tool it is, and the client then fails the exchange.
func TestUDPingpongNeedsGID(t *testing.T) {
	devs := devices(t, 2)
	for i, pair := range [][2]string{{"ibv_ud_pingpong", "ud-pingpong"}, {"ud-pingpong", "ibv_ud_pingpong"}} {
		port := strconv.Itoa(18730 + i)
		srv := startPeer(t, time.Minute, pair[0], "-d", devs[0], "-p", port)
		waitListening(t, srv, 18730+i, 30*time.Second)
		cli := startPeer(t, time.Minute, pair[1], "-d", devs[1], "-p", port, "10.99.0.1")
		<-srv.done
		<-cli.done
		if out := srv.out.String(); srv.err == nil || !strings.Contains(out, "Failed to create AH") {
			t.Errorf("server %s without -g: err %v:\n%s", pair[0], srv.err, out)
		}
		if cli.err == nil {
			t.Errorf("client %s without -g succeeded:\n%s", pair[1], cli.out.String())
		}
		t.Logf("server %s: %s; client %s: %s", pair[0], strings.TrimSpace(srv.out.String()), pair[1], strings.TrimSpace(cli.out.String()))
	}
}
