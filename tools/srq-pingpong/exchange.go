package main

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	pp "github.com/pureverbs/pureverbs/tools/internal/pingpong"
)

// The address exchange is ibv_srq_pingpong's: maxQP records of
// qp.PeerRecordLen bytes each way, whatever -q is (records past -q are
// all zeros), QP i pairing with the peer's QP i. The client writes its
// records, reads the server's and writes "done"; the server reads, connects
// its QPs, writes, and reads "done".

// doneMsg is "done" with its NUL, as the C tool writes it.
var doneMsg = [5]byte{'d', 'o', 'n', 'e', 0}

// writeRecords writes the maxQP records for local (zero records after it).
func writeRecords(w io.Writer, local []qp.Peer) error {
	buf := make([]byte, 0, maxQP*qp.PeerRecordLen)
	for i := range maxQP {
		var p qp.Peer
		if i < len(local) {
			p = local[i]
		}
		text, err := p.MarshalText()
		if err != nil {
			return err
		}
		buf = append(append(buf, text...), 0)
	}
	_, err := w.Write(buf)
	return err
}

// readRecords reads maxQP records and returns the first n.
func readRecords(r io.Reader, n int) ([]qp.Peer, error) {
	buf := make([]byte, maxQP*qp.PeerRecordLen)
	if k, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%d/%d: Couldn't read remote address [%d]: %w", k%qp.PeerRecordLen, qp.PeerRecordLen, k/qp.PeerRecordLen, err)
	}
	peers := make([]qp.Peer, n)
	for i := range n {
		if err := peers[i].UnmarshalText(buf[i*qp.PeerRecordLen : (i+1)*qp.PeerRecordLen]); err != nil {
			return nil, err
		}
	}
	return peers, nil
}

// clientExchange runs the client's half on conn.
func clientExchange(conn io.ReadWriter, local []qp.Peer) ([]qp.Peer, error) {
	if err := writeRecords(conn, local); err != nil {
		return nil, fmt.Errorf("Couldn't send local address: %w", err)
	}
	remote, err := readRecords(conn, len(local))
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(doneMsg[:]); err != nil {
		return nil, fmt.Errorf("client write: %w", err)
	}
	return remote, nil
}

// serverExchange runs the server's half on conn; connect is called with
// the client's records before the server sends its own.
func serverExchange(conn io.ReadWriter, local []qp.Peer, connect func([]qp.Peer) error) ([]qp.Peer, error) {
	remote, err := readRecords(conn, len(local))
	if err != nil {
		return nil, err
	}
	if err := connect(remote); err != nil {
		return nil, fmt.Errorf("Couldn't connect to remote QP: %w", err)
	}
	if err := writeRecords(conn, local); err != nil {
		return nil, fmt.Errorf("Couldn't send local address: %w", err)
	}
	var done [len(doneMsg)]byte
	if _, err := io.ReadFull(conn, done[:]); err != nil || done != doneMsg {
		return nil, fmt.Errorf("client write: peer ended with %q (%v), not \"done\"", done[:], err)
	}
	return remote, nil
}

// dialExchange connects to the server and runs the client's half, both
// within pingpong.ExchangeTimeout.
func dialExchange(host string, port int, local []qp.Peer) ([]qp.Peer, error) {
	deadline := time.Now().Add(pp.ExchangeTimeout)
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), pp.ExchangeTimeout)
	if err != nil {
		return nil, fmt.Errorf("Couldn't connect to %s:%d: %w", host, port, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("Couldn't connect to %s:%d: %w", host, port, err)
	}
	return clientExchange(conn, local)
}

// acceptExchange takes one client from ln (and closes it) and runs the
// server's half within pingpong.ExchangeTimeout.
func acceptExchange(ln net.Listener, local []qp.Peer, connect func([]qp.Peer) error) ([]qp.Peer, error) {
	conn, err := pp.Accept(ln)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return serverExchange(conn, local, connect)
}
