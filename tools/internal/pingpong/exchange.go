package pingpong

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ExchangeTimeout bounds the address exchange from the moment the TCP
// connection is made (DialExchange's connect included): a peer that
// connects and then says nothing, a port scanner on the server's port say,
// ends the run with an error instead of holding it for ever as it holds
// the C tools. Both ends answer at once (the server after modifying one
// QP), so a minute is ample.
var ExchangeTimeout = time.Minute

// The address exchange is ibv_rc_pingpong's: the client sends its message,
// the server reads it, connects its QP to the client's (so that it is ready
// to receive before the client can send), answers with its own message, and
// the client closes the exchange with "done". Each message is read in full:
// the C tool expects each to arrive in one read, which TCP does not promise.

// ClientExchange runs the client's half on conn and returns the server's
// address.
func ClientExchange(conn io.ReadWriter, local Dest) (Dest, error) {
	out := local.Marshal()
	if _, err := conn.Write(out[:]); err != nil {
		return Dest{}, fmt.Errorf("Couldn't send local address: %w", err)
	}
	var in [MsgLen]byte
	if _, err := io.ReadFull(conn, in[:]); err != nil {
		return Dest{}, fmt.Errorf("Couldn't read/write remote address: %w", err)
	}
	if _, err := conn.Write(doneMsg[:]); err != nil {
		return Dest{}, fmt.Errorf("Couldn't read/write remote address: %w", err)
	}
	return ParseDest(in[:])
}

// ServerExchange runs the server's half on conn: connect is called with the
// client's address before the server sends its own.
func ServerExchange(conn io.ReadWriter, local Dest, connect func(remote Dest) error) (Dest, error) {
	var in [MsgLen]byte
	if n, err := io.ReadFull(conn, in[:]); err != nil {
		return Dest{}, fmt.Errorf("%d/%d: Couldn't read remote address: %w", n, MsgLen, err)
	}
	remote, err := ParseDest(in[:])
	if err != nil {
		return Dest{}, err
	}
	if err := connect(remote); err != nil {
		return Dest{}, fmt.Errorf("Couldn't connect to remote QP: %w", err)
	}
	out := local.Marshal()
	if _, err := conn.Write(out[:]); err != nil {
		return Dest{}, fmt.Errorf("Couldn't send/recv local address: %w", err)
	}
	var done [len(doneMsg)]byte
	if _, err := io.ReadFull(conn, done[:]); err != nil {
		return Dest{}, fmt.Errorf("Couldn't send/recv local address: %w", err)
	}
	if done != doneMsg {
		return Dest{}, fmt.Errorf("Couldn't send/recv local address: peer closed with %q, not \"done\"", done[:])
	}
	return remote, nil
}

// DialExchange connects to the server at host:port and runs the client's
// half.
func DialExchange(host string, port int, local Dest) (Dest, error) {
	deadline := time.Now().Add(ExchangeTimeout)
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), ExchangeTimeout)
	if err != nil {
		return Dest{}, fmt.Errorf("Couldn't connect to %s:%d: %w", host, port, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return Dest{}, fmt.Errorf("Couldn't connect to %s:%d: %w", host, port, err)
	}
	return ClientExchange(conn, local)
}

// Listen opens the server's socket on every address (Go listeners set
// SO_REUSEADDR, as the C tool does).
func Listen(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("Couldn't listen to port %d: %w", port, err)
	}
	return ln, nil
}

// AcceptExchange takes one client from ln, closes ln, and runs the server's
// half with it within ExchangeTimeout.
func AcceptExchange(ln net.Listener, local Dest, connect func(remote Dest) error) (Dest, error) {
	conn, err := Accept(ln)
	if err != nil {
		return Dest{}, err
	}
	defer conn.Close()
	return ServerExchange(conn, local, connect)
}

// Accept takes one client from ln, closes ln, and gives the connection
// ExchangeTimeout for the exchange.
func Accept(ln net.Listener) (net.Conn, error) {
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return nil, fmt.Errorf("accept() failed: %w", err)
	}
	if err := conn.SetDeadline(time.Now().Add(ExchangeTimeout)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("accept() failed: %w", err)
	}
	return conn, nil
}
