package pingpong

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

func cMessage(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(cMessageHex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeC plays the other end the way ibv_rc_pingpong does, step by step, on
// one side of a pipe, and reports the first difference.
func fakeC(t *testing.T, conn net.Conn, steps func(conn net.Conn) error) chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		errc <- steps(conn)
	}()
	return errc
}

func expect(conn net.Conn, want []byte) error {
	got := make([]byte, len(want))
	if _, err := io.ReadFull(conn, got); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return errors.New("read " + hex.EncodeToString(got) + ", want " + hex.EncodeToString(want))
	}
	return nil
}

// The Go client against a C server: 52 bytes out, 52 in, then "done\0".
func TestClientExchangeWithCServer(t *testing.T) {
	goEnd, cEnd := net.Pipe()
	defer goEnd.Close()
	local := Dest{LID: 0x1f, QPN: 0x000012, PSN: 0x345678, GID: uverbs.GID{0: 0xfe, 1: 0x80, 15: 2}}
	errc := fakeC(t, cEnd, func(c net.Conn) error {
		if err := expect(c, []byte("001f:000012:345678:fe800000000000000000000000000002\x00")); err != nil {
			return err
		}
		if _, err := c.Write(cMessage(t)); err != nil {
			return err
		}
		return expect(c, []byte("done\x00"))
	})
	remote, err := ClientExchange(goEnd, local)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal("C server:", err)
	}
	if want := (Dest{QPN: 0x11, PSN: 0xabcdef, GID: mappedGID}); remote != want {
		t.Errorf("remote = %+v, want %+v", remote, want)
	}
}

// The Go server against a C client, which sends its message in two pieces:
// the server connects before it answers and waits for "done".
func TestServerExchangeWithCClient(t *testing.T) {
	goEnd, cEnd := net.Pipe()
	defer goEnd.Close()
	local := Dest{QPN: 0x22, PSN: 0x1, GID: mappedGID}
	connected := make(chan Dest, 1)
	errc := fakeC(t, cEnd, func(c net.Conn) error {
		msg := cMessage(t)
		if _, err := c.Write(msg[:10]); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
		if _, err := c.Write(msg[10:]); err != nil {
			return err
		}
		if err := expect(c, []byte("0000:000022:000001:00000000000000000000ffff0a630001\x00")); err != nil {
			return err
		}
		select {
		case <-connected:
		default:
			return errors.New("server answered before connecting its QP")
		}
		_, err := c.Write([]byte("done\x00"))
		return err
	})
	remote, err := ServerExchange(goEnd, local, func(r Dest) error {
		connected <- r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal("C client:", err)
	}
	if want := (Dest{QPN: 0x11, PSN: 0xabcdef, GID: mappedGID}); remote != want {
		t.Errorf("remote = %+v, want %+v", remote, want)
	}
}

// A server that cannot connect its QP says nothing more to the client.
func TestServerExchangeConnectFails(t *testing.T) {
	goEnd, cEnd := net.Pipe()
	errc := fakeC(t, cEnd, func(c net.Conn) error {
		if _, err := c.Write(cMessage(t)); err != nil {
			return err
		}
		n, err := c.Read(make([]byte, MsgLen))
		if n != 0 || err != io.EOF {
			return errors.New("server sent its address after failing to connect")
		}
		return nil
	})
	_, err := ServerExchange(goEnd, Dest{}, func(Dest) error { return errors.New("modify QP to RTR failed") })
	goEnd.Close()
	if err == nil || !strings.Contains(err.Error(), "Couldn't connect to remote QP") {
		t.Errorf("err = %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestServerExchangeBadDone(t *testing.T) {
	goEnd, cEnd := net.Pipe()
	defer goEnd.Close()
	errc := fakeC(t, cEnd, func(c net.Conn) error {
		if _, err := c.Write(cMessage(t)); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, make([]byte, MsgLen)); err != nil {
			return err
		}
		_, err := c.Write([]byte("nope\x00"))
		return err
	})
	if _, err := ServerExchange(goEnd, Dest{}, func(Dest) error { return nil }); err == nil {
		t.Error("a closing message other than done was accepted")
	}
	<-errc
}

func TestShortMessage(t *testing.T) {
	goEnd, cEnd := net.Pipe()
	defer goEnd.Close()
	errc := fakeC(t, cEnd, func(c net.Conn) error {
		_, err := c.Write(cMessage(t)[:30])
		return err
	})
	_, err := ServerExchange(goEnd, Dest{}, func(Dest) error { t.Error("connect called"); return nil })
	if err == nil || !strings.HasPrefix(err.Error(), "30/52: Couldn't read remote address") {
		t.Errorf("err = %v", err)
	}
	<-errc
}

// Both Go halves over real TCP, through listen, accept and dial.
func TestExchangeOverTCP(t *testing.T) {
	ln, err := Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	server := Dest{LID: 0, QPN: 0x17, PSN: 0xfedcba, GID: mappedGID}
	client := Dest{LID: 0, QPN: 0x18, PSN: 0x000123, GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 2}}
	type result struct {
		d   Dest
		err error
	}
	srv := make(chan result, 1)
	var seen Dest
	go func() {
		d, err := AcceptExchange(ln, server, func(r Dest) error { seen = r; return nil })
		srv <- result{d, err}
	}()
	got, err := DialExchange("127.0.0.1", port, client)
	if err != nil {
		t.Fatal(err)
	}
	s := <-srv
	if s.err != nil {
		t.Fatal(s.err)
	}
	if got != server || s.d != client || seen != client {
		t.Errorf("client saw %+v, server saw %+v (connect %+v)", got, s.d, seen)
	}
	// The listener is closed after the one client.
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the server still listens after its client")
	}
}

func TestDialNobody(t *testing.T) {
	ln, err := Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if _, err := DialExchange("127.0.0.1", port, Dest{}); err == nil || !strings.Contains(err.Error(), "Couldn't connect to 127.0.0.1:") {
		t.Errorf("err = %v", err)
	}
}

// silentPeer listens on loopback and takes one connection on which it
// says nothing, until the test ends.
func silentPeer(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln
}

// shortTimeout sets ExchangeTimeout to d for the test.
func shortTimeout(t *testing.T, d time.Duration) {
	old := ExchangeTimeout
	ExchangeTimeout = d
	t.Cleanup(func() { ExchangeTimeout = old })
}

// within fails t unless f returns within limit, and returns its error.
func within(t *testing.T, limit time.Duration, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(limit):
		t.Fatalf("still waiting after %v", limit)
		return nil
	}
}

// A client that connects and says nothing (a port scanner) ends the
// server's exchange after ExchangeTimeout with a timeout error; the server
// used to wait for ever.
func TestServerExchangeSilentClient(t *testing.T) {
	shortTimeout(t, 200*time.Millisecond)
	ln, err := Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = within(t, 5*time.Second, func() error {
		_, err := AcceptExchange(ln, Dest{}, func(Dest) error { return nil })
		return err
	})
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

// A server that accepts and never answers ends the client's exchange after
// ExchangeTimeout.
func TestClientExchangeSilentServer(t *testing.T) {
	shortTimeout(t, 200*time.Millisecond)
	ln := silentPeer(t)
	err := within(t, 5*time.Second, func() error {
		_, err := DialExchange("127.0.0.1", ln.Addr().(*net.TCPAddr).Port, Dest{})
		return err
	})
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
}
