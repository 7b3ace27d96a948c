package main

import (
	"fmt"
	"io"
	"net"
	"strconv"
)

// The address exchange is ibv_rc_pingpong's: the client sends its message,
// the server reads it, connects its QP to the client's (so that it is ready
// to receive before the client can send), answers with its own message, and
// the client closes the exchange with "done". Each message is read in full:
// the C tool expects each to arrive in one read, which TCP does not promise.

// clientExchange runs the client's half on conn and returns the server's
// address.
func clientExchange(conn io.ReadWriter, local dest) (dest, error) {
	out := local.marshal()
	if _, err := conn.Write(out[:]); err != nil {
		return dest{}, fmt.Errorf("Couldn't send local address: %w", err)
	}
	var in [msgLen]byte
	if _, err := io.ReadFull(conn, in[:]); err != nil {
		return dest{}, fmt.Errorf("Couldn't read/write remote address: %w", err)
	}
	if _, err := conn.Write(doneMsg[:]); err != nil {
		return dest{}, fmt.Errorf("Couldn't read/write remote address: %w", err)
	}
	return parseDest(in[:])
}

// serverExchange runs the server's half on conn: connect is called with the
// client's address before the server sends its own.
func serverExchange(conn io.ReadWriter, local dest, connect func(remote dest) error) (dest, error) {
	var in [msgLen]byte
	if n, err := io.ReadFull(conn, in[:]); err != nil {
		return dest{}, fmt.Errorf("%d/%d: Couldn't read remote address: %w", n, msgLen, err)
	}
	remote, err := parseDest(in[:])
	if err != nil {
		return dest{}, err
	}
	if err := connect(remote); err != nil {
		return dest{}, fmt.Errorf("Couldn't connect to remote QP: %w", err)
	}
	out := local.marshal()
	if _, err := conn.Write(out[:]); err != nil {
		return dest{}, fmt.Errorf("Couldn't send/recv local address: %w", err)
	}
	var done [len(doneMsg)]byte
	if _, err := io.ReadFull(conn, done[:]); err != nil {
		return dest{}, fmt.Errorf("Couldn't send/recv local address: %w", err)
	}
	if done != doneMsg {
		return dest{}, fmt.Errorf("Couldn't send/recv local address: peer closed with %q, not \"done\"", done[:])
	}
	return remote, nil
}

// dialExchange connects to the server at host:port and runs the client's
// half.
func dialExchange(host string, port int, local dest) (dest, error) {
	conn, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return dest{}, fmt.Errorf("Couldn't connect to %s:%d: %w", host, port, err)
	}
	defer conn.Close()
	return clientExchange(conn, local)
}

// listen opens the server's socket on every address (Go listeners set
// SO_REUSEADDR, as the C tool does).
func listen(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("Couldn't listen to port %d: %w", port, err)
	}
	return ln, nil
}

// acceptExchange takes one client from ln, closes ln, and runs the server's
// half with it.
func acceptExchange(ln net.Listener, local dest, connect func(remote dest) error) (dest, error) {
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return dest{}, fmt.Errorf("accept() failed: %w", err)
	}
	defer conn.Close()
	return serverExchange(conn, local, connect)
}
