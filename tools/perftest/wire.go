package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// wireVersion is the version this tool announces: Debian 12's perftest
// 4.5 sends "6.06". Every value from 5.70 to below 6.28 speaks the same
// exchange (8-byte iteration counts, system data, the 2-byte MTU, no
// parameter negotiation).
const wireVersion = "6.06"

// Sizes of perftest's out-of-band messages.
const (
	versionLen = 16  // char version[MAX_VERSION]
	destLen    = 108 // KEY_PRINT_FMT_GID and its NUL
	reportLen  = 8   // each of the bandwidth report's five fields
)

// exchanger is one side of perftest's out-of-band channel: every exchange
// is this side's message for the peer's of the same size. The client
// writes first and then reads; the server reads first.
type exchanger interface {
	exchange(mine, theirs []byte) error
	// send writes a message nobody reads (the closing "done").
	send(msg []byte) error
	// setTimeout changes the limit of each exchange (0: none).
	setTimeout(d time.Duration)
	Close() error
}

// tcpExchanger is the TCP channel on port 18515 (-p).
type tcpExchanger struct {
	conn    net.Conn
	client  bool
	timeout time.Duration // per exchange
}

// exchangeTimeout bounds each exchange while the peer is expected to
// answer at once; a peer whose parameters differ stops answering and the
// run fails instead of hanging. PERFTEST_TIMEOUT (a Go duration) changes
// it and stallLimit.
var exchangeTimeout = 60 * time.Second

// dialExchanger connects to the server, retrying for a while as perftest
// does not (it fails at once) but a script starting both ends needs.
func dialExchanger(host string, port int) (*tcpExchanger, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
		if err == nil {
			return &tcpExchanger{conn: c, client: true, timeout: exchangeTimeout}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("Couldn't connect to %s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// acceptExchanger listens on port, takes one connection and closes the
// listener, as perftest's server does.
func acceptExchanger(port int) (*tcpExchanger, error) {
	ln, err := net.Listen("tcp4", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("Couldn't listen to port %d: %w", port, err)
	}
	return acceptOne(ln)
}

// acceptOne takes one connection from ln and closes it.
func acceptOne(ln net.Listener) (*tcpExchanger, error) {
	defer ln.Close()
	c, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("accept() failed: %w", err)
	}
	return &tcpExchanger{conn: c, timeout: exchangeTimeout}, nil
}

func (t *tcpExchanger) exchange(mine, theirs []byte) error {
	if t.timeout > 0 {
		t.conn.SetDeadline(time.Now().Add(t.timeout))
	} else {
		t.conn.SetDeadline(time.Time{})
	}
	if t.client {
		if err := t.write(mine); err != nil {
			return err
		}
	}
	if _, err := io.ReadFull(t.conn, theirs); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("the peer sent nothing for %v (do both ends run with the same parameters?): %w", t.timeout, err)
		}
		return fmt.Errorf("Couldn't read remote address: %w", err)
	}
	if !t.client {
		return t.write(mine)
	}
	return nil
}

func (t *tcpExchanger) write(msg []byte) error {
	if _, err := t.conn.Write(msg); err != nil {
		return fmt.Errorf("Couldn't send local address: %w", err)
	}
	return nil
}

func (t *tcpExchanger) send(msg []byte) error {
	t.conn.SetDeadline(time.Now().Add(exchangeTimeout))
	return t.write(msg)
}

func (t *tcpExchanger) setTimeout(d time.Duration) { t.timeout = d }

func (t *tcpExchanger) Close() error { return t.conn.Close() }

// session is the exchange sequence both tools run, over an exchanger.
type session struct {
	x        exchanger
	gidIndex int // sent in the binary records
}

// exchangeVersions trades the version strings (exchange_versions) and
// refuses a peer whose version does not parse or is older than 5.70, as
// check_version_compatibility does.
func (s *session) exchangeVersions() error {
	var mine, theirs [versionLen]byte
	copy(mine[:], wireVersion)
	if err := s.x.exchange(mine[:], theirs[:]); err != nil {
		return fmt.Errorf(" Failed to exchange data between server and clients: %w", err)
	}
	str := string(theirs[:])
	if i := strings.IndexByte(str, 0); i >= 0 {
		str = str[:i]
	}
	v, ok := parseVersion(str)
	if !ok {
		return fmt.Errorf("%w: version %q is not a perftest version", errPeer, str)
	}
	if v < minPeerVersion {
		return fmt.Errorf("Please use a newer version of perftest on the peer (it is %s; this side speaks %s)", str, wireVersion)
	}
	return nil
}

// exchangeU32 trades one big-endian 32-bit number (check_sys_data).
func (s *session) exchangeU32(v uint32) (uint32, error) {
	var mine, theirs [4]byte
	binary.BigEndian.PutUint32(mine[:], v)
	if err := s.x.exchange(mine[:], theirs[:]); err != nil {
		return 0, fmt.Errorf(" Failed to exchange data between server and clients: %w", err)
	}
	return binary.BigEndian.Uint32(theirs[:]), nil
}

// exchangeMTU trades the MTU enum as a decimal string and its NUL
// (check_mtu) and returns the peer's string, unchecked.
func (s *session) exchangeMTU(mtu int) (string, error) {
	var mine, theirs [2]byte
	copy(mine[:], strconv.Itoa(mtu))
	if err := s.x.exchange(mine[:], theirs[:]); err != nil {
		return "", fmt.Errorf(" Failed to exchange data between server and clients: %w", err)
	}
	str, _, _ := strings.Cut(string(theirs[:]), "\x00")
	return str, nil
}

// handShake trades address records (ctx_hand_shake): text over TCP,
// perftest's binary struct over RDMA CM.
func (s *session) handShake(mine dest) (dest, error) {
	if _, ok := s.x.(*cmExchanger); ok {
		var m, t [cmDestLen]byte
		mine.marshalBinary(m[:], s.gidIndex)
		if err := s.x.exchange(m[:], t[:]); err != nil {
			return dest{}, fmt.Errorf("Failed to exchange data between server and clients: %w", err)
		}
		return parseBinaryDest(t[:]), nil
	}
	var m, t [destLen]byte
	mine.marshal(&m)
	if err := s.x.exchange(m[:], t[:]); err != nil {
		return dest{}, fmt.Errorf("Failed to exchange data between server and clients: %w", err)
	}
	d, err := parseDest(t[:])
	if err != nil {
		return dest{}, fmt.Errorf("%w: %w", errPeer, err)
	}
	return d, nil
}

// shakeRecords trades one record per QP of mine and returns the peer's,
// each checked (checkRecord) before the next exchange.
func (s *session) shakeRecords(mine []dest) ([]dest, error) {
	rem := make([]dest, len(mine))
	for i := range mine {
		d, err := s.handShake(mine[i])
		if err != nil {
			return nil, err
		}
		if err := checkRecord(i, d); err != nil {
			return nil, err
		}
		rem[i] = d
	}
	return rem, nil
}

// bwReport is perftest's struct bw_report_data as xchg_bw_reports sends
// it (without the per-port fields).
type bwReport struct {
	size, iters        uint64
	peak, avg, msgRate float64
}

// exchangeReport trades bandwidth reports, field by field, each a
// big-endian 8-byte message.
func (s *session) exchangeReport(mine bwReport) (bwReport, error) {
	var r bwReport
	fields := []struct {
		mine   uint64
		theirs *uint64
		f      *float64
	}{
		{mine.size, &r.size, nil},
		{mine.iters, &r.iters, nil},
		{math.Float64bits(mine.peak), nil, &r.peak},
		{math.Float64bits(mine.avg), nil, &r.avg},
		{math.Float64bits(mine.msgRate), nil, &r.msgRate},
	}
	for _, f := range fields {
		var m, t [reportLen]byte
		binary.BigEndian.PutUint64(m[:], f.mine)
		if err := s.x.exchange(m[:], t[:]); err != nil {
			return r, fmt.Errorf(" Failed to exchange data between server and clients: %w", err)
		}
		v := binary.BigEndian.Uint64(t[:])
		if f.theirs != nil {
			*f.theirs = v
		} else {
			*f.f = math.Float64frombits(v)
		}
	}
	return r, nil
}

// closeConnection is ctx_close_connection: one more record exchange,
// then "done" and its NUL, which nobody reads.
func (s *session) closeConnection(mine dest) error {
	if _, err := s.handShake(mine); err != nil {
		return err
	}
	return s.x.send([]byte("done\x00"))
}
