package ucma

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

// DevicePath is the RDMA CM character device (module rdma_ucm).
const DevicePath = "/dev/infiniband/rdma_cm"

// cmABIPath holds the RDMA CM ABI version the kernel speaks.
const cmABIPath = "/sys/class/misc/rdma_cm/abi_version"

// Channel is an RDMA CM event channel: one open of /dev/infiniband/rdma_cm
// (what rdma_create_event_channel opens). The ids created on it report
// their events on it; closing it destroys every id still on it. The fd is
// non-blocking; WaitEvent waits on it with an fdwait.Poller in Netpoll
// mode, which parks the goroutine, not an OS thread, so that a program
// may wait on many channels. Commands may be issued from several
// goroutines; Close waits for commands in progress and wakes every
// WaitEvent with ErrClosed.
//
// Events are copied out of the kernel whole, so there is nothing to
// acknowledge: unlike librdmacm's rdma_destroy_id, DestroyID never waits
// for an application to ack an event.
type Channel struct {
	f  *os.File
	rc syscall.RawConn
	// fd is f's: what WaitEvent waits on. Close closes wait first, so
	// that no wait watches it once f closes it.
	fd     int
	wait   *fdwait.Poller
	closed atomic.Bool
}

// Open opens a new event channel. It fails with an error wrapping
// fs.ErrNotExist when rdma_ucm is not loaded and with one matching
// uverbs.ErrNotSupported for an ABI other than 4.
func Open() (*Channel, error) {
	if b, err := os.ReadFile(cmABIPath); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v != ucmaABIVersion {
			return nil, fmt.Errorf("ucma: rdma_cm ABI version %d not supported (need %d): %w", v, ucmaABIVersion, uverbs.ErrNotSupported)
		}
	}
	fd, err := unix.Open(DevicePath, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("ucma: open %s: %w", DevicePath, &fs.PathError{Op: "open", Path: DevicePath, Err: err})
	}
	w, err := fdwait.New(fdwait.Netpoll)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ucma: %s: %w", DevicePath, err)
	}
	f := os.NewFile(uintptr(fd), DevicePath)
	rc, err := f.SyscallConn()
	if err != nil {
		w.Close()
		f.Close()
		return nil, fmt.Errorf("ucma: %s: %w", DevicePath, err)
	}
	return &Channel{f: f, rc: rc, fd: fd, wait: w}, nil
}

// Close closes the channel: the kernel destroys every id still on it
// (rejecting connection requests not yet accepted) and drops their
// events. Idempotent.
func (ch *Channel) Close() error {
	ch.closed.Store(true)
	ch.wait.Close() // wakes every WaitEvent, and waits for them to leave
	if err := ch.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("ucma: close rdma_cm channel: %w", err)
	}
	return nil
}

// SyscallConn gives access to the channel's fd for callers who poll or
// epoll it themselves (rdma_cm_event_channel's fd): it is non-blocking,
// readable while an event is queued, and read with ReadEvent until EAGAIN.
// The channel owns the fd: use it only inside RawConn.Control or Read,
// which keep it open and fail once Close has run; never close it.
func (ch *Channel) SyscallConn() (syscall.RawConn, error) {
	if ch.closed.Load() {
		return nil, closedError("rdma_cm channel")
	}
	return ch.rc, nil
}

// pollErr wraps an error of the channel's RawConn for verb: ErrClosed once
// the channel is closed (RawConn.Control says "use of closed file").
func (ch *Channel) pollErr(verb string, err error) error {
	if ch.closed.Load() || errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("ucma: %s: %w", verb, ErrClosed)
	}
	return fmt.Errorf("ucma: %s: %w", verb, err)
}

// ucmaFrame is the contiguous image of one command: the header, then the
// command struct.
type ucmaFrame[T any] struct {
	hdr ucmaCmdHdr
	cmd T
}

// ucmaWrite sends cmd (a command struct) with its header; out is the size of
// the response its Response field points at, if any. The response must stay
// reachable through that GC-visible field until the call returns.
func ucmaWrite[T any](ch *Channel, verb string, op uint32, cmd *T, out uintptr) error {
	f := ucmaFrame[T]{hdr: ucmaCmdHdr{Cmd: op, In: uint16(unsafe.Sizeof(*cmd)), Out: uint16(out)}, cmd: *cmd}
	var errno unix.Errno
	err := ch.rc.Control(func(fd uintptr) {
		errno = fullIO(int(fd), unsafe.Pointer(&f), unsafe.Sizeof(f))
	})
	if err != nil {
		return ch.pollErr(verb, err)
	}
	if errno != 0 {
		return cmdError(verb, errno)
	}
	return nil
}

// PortSpace is enum rdma_ucm_port_space: which CM service ids (ports) an id
// uses, and so which QP type.
type PortSpace uint16

// Port spaces.
const (
	PortSpaceIPoIB PortSpace = 0x0002
	PortSpaceTCP   PortSpace = 0x0106 // RC connections (RDMA_PS_TCP)
	PortSpaceUDP   PortSpace = 0x0111 // UD, SIDR (RDMA_PS_UDP)
	PortSpaceIB    PortSpace = 0x013F // any QP type, AF_IB addressing
)

// CreateID creates a CM id on the channel (rdma_create_id,
// RDMA_USER_CM_CMD_CREATE_ID) and returns the kernel's handle for it. uid
// comes back with every event of the id; the kernel drops the events of an
// id whose uid is 0, so it must not be 0. qpType matters only in
// PortSpaceIB (TCP is RC, UDP is UD).
func (ch *Channel) CreateID(uid uint64, ps PortSpace, qpType uverbs.QPType) (uint32, error) {
	if uid == 0 {
		return 0, fmt.Errorf("ucma: rdma_create_id: uid 0 (the kernel drops its events): %w", unix.EINVAL)
	}
	var resp ucmaCreateIDResp
	cmd := ucmaCreateID{UID: uid, Response: ptr64{unsafe.Pointer(&resp)}, PS: uint16(ps), QPType: uint8(qpType)}
	if err := ucmaWrite(ch, "rdma_create_id", ucmaCmdCreateID, &cmd, unsafe.Sizeof(resp)); err != nil {
		return 0, err
	}
	return resp.ID, nil
}

// DestroyID destroys a CM id (rdma_destroy_id, RDMA_USER_CM_CMD_DESTROY_ID)
// and drops its queued events; it returns how many events of the id the
// channel had reported. It does not wait for anything but the kernel.
func (ch *Channel) DestroyID(id uint32) (uint32, error) {
	var resp ucmaDestroyIDResp
	cmd := ucmaDestroyID{Response: ptr64{unsafe.Pointer(&resp)}, ID: id}
	if err := ucmaWrite(ch, "rdma_destroy_id", ucmaCmdDestroyID, &cmd, unsafe.Sizeof(resp)); err != nil {
		return 0, err
	}
	return resp.EventsReported, nil
}

// Bind binds an id to a local address and port (rdma_bind_addr,
// RDMA_USER_CM_CMD_BIND); port 0 lets the kernel pick one. An address that
// an RDMA device owns also binds the id to that device.
func (ch *Channel) Bind(id uint32, addr netip.AddrPort) error {
	cmd := ucmaBind{ID: id}
	n, err := putSockaddr(&cmd.Addr, addr)
	if err != nil {
		return fmt.Errorf("ucma: rdma_bind_addr: %w", err)
	}
	cmd.AddrSize = n
	return ucmaWrite(ch, "rdma_bind_addr", ucmaCmdBind, &cmd, 0)
}

// ResolveAddr starts resolving dst to an RDMA device and GID
// (rdma_resolve_addr, RDMA_USER_CM_CMD_RESOLVE_ADDR); the result is an
// ADDR_RESOLVED or ADDR_ERROR event. A valid src binds the id to that source
// first (a zero AddrPort leaves the choice to the routing table).
func (ch *Channel) ResolveAddr(id uint32, src, dst netip.AddrPort, timeout time.Duration) error {
	cmd := ucmaResolveAddr{ID: id, TimeoutMS: millis(timeout)}
	if src.IsValid() {
		n, err := putSockaddr(&cmd.SrcAddr, src)
		if err != nil {
			return fmt.Errorf("ucma: rdma_resolve_addr: source: %w", err)
		}
		cmd.SrcSize = n
	}
	n, err := putSockaddr(&cmd.DstAddr, dst)
	if err != nil {
		return fmt.Errorf("ucma: rdma_resolve_addr: destination: %w", err)
	}
	cmd.DstSize = n
	return ucmaWrite(ch, "rdma_resolve_addr", ucmaCmdResolveAddr, &cmd, 0)
}

// ResolveRoute starts resolving the path to the resolved address
// (rdma_resolve_route, RDMA_USER_CM_CMD_RESOLVE_ROUTE): a ROUTE_RESOLVED or
// ROUTE_ERROR event follows.
func (ch *Channel) ResolveRoute(id uint32, timeout time.Duration) error {
	cmd := ucmaResolveRoute{ID: id, TimeoutMS: millis(timeout)}
	return ucmaWrite(ch, "rdma_resolve_route", ucmaCmdResolveRoute, &cmd, 0)
}

// millis converts a timeout for the kernel; 0 and negative are 1 ms, the
// shortest it takes.
func millis(d time.Duration) uint32 {
	ms := d.Milliseconds()
	switch {
	case ms < 1:
		return 1
	case ms > 1<<31:
		return 1 << 31
	}
	return uint32(ms)
}

// Listen makes a bound id listen (rdma_listen, RDMA_USER_CM_CMD_LISTEN);
// CONNECT_REQUEST events follow. The kernel takes a backlog of 0 or less,
// or above net.rdma_ucm.max_backlog, as that maximum (1024 by default).
func (ch *Channel) Listen(id uint32, backlog int) error {
	if backlog < 0 {
		backlog = 0
	}
	cmd := ucmaListen{ID: id, Backlog: uint32(min(backlog, 1<<31))}
	return ucmaWrite(ch, "rdma_listen", ucmaCmdListen, &cmd, 0)
}

// ConnParam are the parameters of a connect, accept or connection event
// (struct rdma_conn_param). In an event, PrivateData is what the peer's CM
// message carried: on RoCE always the message's full private data field
// (56 bytes in a REQ, 196 in a REP, 148 in a REJ), whatever the sender put
// in it.
type ConnParam struct {
	QPNum uint32
	// QKey is the Q_Key of a UD (SIDR) accept; ignored for connected ids.
	QKey               uint32
	PrivateData        []byte
	SRQ                bool
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
}

// MaxPrivateData is the most private data the ABI carries in one command.
// The CM message limits what reaches the wire (see the MaxPrivateData*
// constants of qp/rdmacm).
const MaxPrivateData = ucmaMaxPrivateData

func (p *ConnParam) abi(verb string) (ucmaConnParam, error) {
	if len(p.PrivateData) > ucmaMaxPrivateData-1 {
		return ucmaConnParam{}, fmt.Errorf("ucma: %s: %d bytes of private data, at most %d fit: %w", verb, len(p.PrivateData), ucmaMaxPrivateData-1, unix.EINVAL)
	}
	c := ucmaConnParam{
		QPNum:              p.QPNum,
		QKey:               p.QKey,
		PrivateDataLen:     uint8(len(p.PrivateData)),
		SRQ:                b2u8(p.SRQ),
		ResponderResources: p.ResponderResources,
		InitiatorDepth:     p.InitiatorDepth,
		FlowControl:        p.FlowControl,
		RetryCount:         p.RetryCount,
		RNRRetryCount:      p.RNRRetryCount,
		Valid:              1,
	}
	copy(c.PrivateData[:], p.PrivateData)
	return c, nil
}

func connParamFrom(c *ucmaConnParam) ConnParam {
	return ConnParam{
		QPNum:              c.QPNum,
		QKey:               c.QKey,
		PrivateData:        append([]byte(nil), c.PrivateData[:c.PrivateDataLen]...),
		SRQ:                c.SRQ != 0,
		ResponderResources: c.ResponderResources,
		InitiatorDepth:     c.InitiatorDepth,
		FlowControl:        c.FlowControl,
		RetryCount:         c.RetryCount,
		RNRRetryCount:      c.RNRRetryCount,
	}
}

// ECE is enhanced connection establishment data (struct rdma_ucm_ece); zero
// for peers that do not use it.
type ECE struct {
	VendorID uint32
	AttrMod  uint32
}

// Connect sends a connect request (rdma_connect, RDMA_USER_CM_CMD_CONNECT)
// on a route-resolved id: a REQ for TCP-space ids, a SIDR REQ for UDP ones.
// The kernel refuses more private data than the REQ holds (EINVAL).
func (ch *Channel) Connect(id uint32, p ConnParam, ece ECE) error {
	c, err := p.abi("rdma_connect")
	if err != nil {
		return err
	}
	cmd := ucmaConnect{ConnParam: c, ID: id, ECE: ucmaECE(ece)}
	return ucmaWrite(ch, "rdma_connect", ucmaCmdConnect, &cmd, 0)
}

// Accept accepts a connection request on the id the CONNECT_REQUEST event
// named (rdma_accept, RDMA_USER_CM_CMD_ACCEPT) and sets the id's uid, from
// when on its events are reported. With p nil it is the active side's
// "established" (valid = 0): after CONNECT_RESPONSE it sends the RTU.
func (ch *Channel) Accept(id uint32, uid uint64, p *ConnParam, ece ECE) error {
	cmd := ucmaAccept{UID: uid, ID: id, ECE: ucmaECE(ece)}
	if p != nil {
		c, err := p.abi("rdma_accept")
		if err != nil {
			return err
		}
		cmd.ConnParam = c
	}
	return ucmaWrite(ch, "rdma_accept", ucmaCmdAccept, &cmd, 0)
}

// Reject rejects a connection request (rdma_reject,
// RDMA_USER_CM_CMD_REJECT). reason 0 sends the IB CM's "consumer
// defined" reason (28); the kernel accepts only 0 and 35 (vendor option not
// supported, rdma_reject_ece).
func (ch *Channel) Reject(id uint32, reason uint8, privateData []byte) error {
	if len(privateData) > ucmaMaxPrivateData-1 {
		return fmt.Errorf("ucma: rdma_reject: %d bytes of private data: %w", len(privateData), unix.EINVAL)
	}
	cmd := ucmaReject{ID: id, Reason: reason, PrivateDataLen: uint8(len(privateData))}
	copy(cmd.PrivateData[:], privateData)
	return ucmaWrite(ch, "rdma_reject", ucmaCmdReject, &cmd, 0)
}

// Disconnect sends a DREQ (rdma_disconnect, RDMA_USER_CM_CMD_DISCONNECT).
// librdmacm moves the QP to ERROR first; that is the caller's to do.
func (ch *Channel) Disconnect(id uint32) error {
	cmd := ucmaDisconnect{ID: id}
	return ucmaWrite(ch, "rdma_disconnect", ucmaCmdDisconnect, &cmd, 0)
}

// InitQPAttr asks the CM for the attributes that move a QP of the id to
// state (rdma_init_qp_attr, RDMA_USER_CM_CMD_INIT_QP_ATTR): the port,
// P_Key index, access flags and Q_Key for INIT; the path, remote QPN and
// PSN for RTR; PSN, timeout and retries for RTS, as the CM negotiated
// them. The mask says which fields to apply; bits beyond what MODIFY_QP
// takes are returned as the kernel gave them.
func (ch *Channel) InitQPAttr(id uint32, state uverbs.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	var resp uverbs.QPAttrABI
	cmd := ucmaInitQPAttr{Response: ptr64{unsafe.Pointer(&resp)}, ID: id, QPState: uint32(state)}
	if err := ucmaWrite(ch, "rdma_init_qp_attr", ucmaCmdInitQPAttr, &cmd, unsafe.Sizeof(resp)); err != nil {
		return uverbs.QPAttr{}, 0, err
	}
	attr, mask := resp.Attr()
	return attr, mask, nil
}

// Notify tells the CM of a QP async event on the id's QP (rdma_notify,
// RDMA_USER_CM_CMD_NOTIFY), e.g. EventCommEst when data arrives before the
// RTU, which establishes the connection.
func (ch *Channel) Notify(id uint32, event uverbs.AsyncEventType) error {
	cmd := ucmaNotify{ID: id, Event: uint32(event)}
	return ucmaWrite(ch, "rdma_notify", ucmaCmdNotify, &cmd, 0)
}

// SetOption sets an id option (rdma_set_option,
// RDMA_USER_CM_CMD_SET_OPTION): level 0 (RDMA_OPTION_ID) names 0 TOS (u8),
// 1 REUSEADDR (int), 2 AFONLY (int), 3 ACK_TIMEOUT (u8).
func (ch *Channel) SetOption(id, level, name uint32, value []byte) error {
	if len(value) == 0 {
		return fmt.Errorf("ucma: rdma_set_option: empty value: %w", unix.EINVAL)
	}
	cmd := ucmaSetOption{OptVal: ptr64{unsafe.Pointer(&value[0])}, ID: id, Level: level, OptName: name, OptLen: uint32(len(value))}
	return ucmaWrite(ch, "rdma_set_option", ucmaCmdSetOption, &cmd, 0)
}

// Addr is what QUERY ADDR reports about an id: the device and port it is
// bound to and its two addresses.
type Addr struct {
	// NodeGUID is the bound device's node GUID as Device.NodeGUID reads
	// it; 0 while the id is bound to no device.
	NodeGUID uint64
	Port     uint8
	PKey     uint16
	Src, Dst netip.AddrPort
	// IBDevIndex is the kernel's index of the device (rxelink.DeviceIndex).
	IBDevIndex uint32
}

// QueryAddr returns the id's device, port and addresses (librdmacm's
// ucma_query_addr, RDMA_USER_CM_QUERY_ADDR).
func (ch *Channel) QueryAddr(id uint32) (Addr, error) {
	var resp ucmaQueryAddrResp
	cmd := ucmaQuery{Response: ptr64{unsafe.Pointer(&resp)}, ID: id, Option: ucmaQueryAddr}
	if err := ucmaWrite(ch, "rdma_query_addr", ucmaCmdQuery, &cmd, unsafe.Sizeof(resp)); err != nil {
		return Addr{}, err
	}
	return Addr{
		NodeGUID:   be64(resp.NodeGUID),
		Port:       resp.PortNum,
		PKey:       resp.PKey,
		Src:        getSockaddr(&resp.SrcAddr),
		Dst:        getSockaddr(&resp.DstAddr),
		IBDevIndex: resp.IBDevIndex,
	}, nil
}

// GIDs is what QUERY GID reports: the GIDs the id's addresses resolved
// to and the P_Key.
type GIDs struct {
	Src, Dst uverbs.GID
	PKey     uint16
}

// QueryGID returns the source and destination GIDs of a resolved id
// (ucma_query_gid, RDMA_USER_CM_QUERY_GID).
func (ch *Channel) QueryGID(id uint32) (GIDs, error) {
	var resp ucmaQueryAddrResp
	cmd := ucmaQuery{Response: ptr64{unsafe.Pointer(&resp)}, ID: id, Option: ucmaQueryGID}
	if err := ucmaWrite(ch, "rdma_query_gid", ucmaCmdQuery, &cmd, unsafe.Sizeof(resp)); err != nil {
		return GIDs{}, err
	}
	src, pkey := getSockaddrIB(&resp.SrcAddr)
	dst, _ := getSockaddrIB(&resp.DstAddr)
	return GIDs{Src: src, Dst: dst, PKey: pkey}, nil
}

// PathRecord is one path record of a resolved route (struct
// ib_path_rec_data): Flags (IB_PATH_* bits) and the record in the SA's
// big-endian wire format.
type PathRecord struct {
	Flags  uint32
	Record [64]byte
}

// QueryPath returns the route's path records, primary first
// (ucma_query_path, RDMA_USER_CM_QUERY_PATH).
func (ch *Channel) QueryPath(id uint32) ([]PathRecord, error) {
	var resp ucmaQueryPathResp
	cmd := ucmaQuery{Response: ptr64{unsafe.Pointer(&resp)}, ID: id, Option: ucmaQueryPath}
	if err := ucmaWrite(ch, "rdma_query_path", ucmaCmdQuery, &cmd, unsafe.Sizeof(resp)); err != nil {
		return nil, err
	}
	n := min(int(resp.NumPaths), len(resp.PathData))
	out := make([]PathRecord, n)
	for i := range out {
		out[i].Flags = resp.PathData[i].Flags
		out[i].Record = *(*[64]byte)(unsafe.Pointer(&resp.PathData[i].PathRec))
	}
	return out, nil
}

// Multicast join flags (RDMA_MC_JOIN_FLAG_*).
const (
	MulticastFullMember         = 0
	MulticastSendOnlyFullMember = 1
)

// JoinMulticast joins the multicast group addr on a UD id (rdma_join_multicast,
// RDMA_USER_CM_CMD_JOIN_MCAST); uid is reported with the group's
// MULTICAST_JOIN or MULTICAST_ERROR event, whose UD parameters hold the
// group's address handle and Q_Key. It returns the membership's handle for
// LeaveMulticast.
func (ch *Channel) JoinMulticast(id uint32, uid uint64, addr netip.AddrPort, flags uint16) (uint32, error) {
	var resp ucmaCreateIDResp
	cmd := ucmaJoinMcast{Response: ptr64{unsafe.Pointer(&resp)}, UID: uid, ID: id, JoinFlags: flags}
	n, err := putSockaddr(&cmd.Addr, addr)
	if err != nil {
		return 0, fmt.Errorf("ucma: rdma_join_multicast: %w", err)
	}
	cmd.AddrSize = n
	if err := ucmaWrite(ch, "rdma_join_multicast", ucmaCmdJoinMcast, &cmd, unsafe.Sizeof(resp)); err != nil {
		return 0, err
	}
	return resp.ID, nil
}

// LeaveMulticast leaves a group joined with JoinMulticast (rdma_leave_multicast,
// RDMA_USER_CM_CMD_LEAVE_MCAST) and returns how many of its events were
// reported.
func (ch *Channel) LeaveMulticast(mcID uint32) (uint32, error) {
	var resp ucmaDestroyIDResp
	cmd := ucmaDestroyID{Response: ptr64{unsafe.Pointer(&resp)}, ID: mcID}
	if err := ucmaWrite(ch, "rdma_leave_multicast", ucmaCmdLeaveMcast, &cmd, unsafe.Sizeof(resp)); err != nil {
		return 0, err
	}
	return resp.EventsReported, nil
}

// MigrateID moves the id from channel from to ch (rdma_migrate_id,
// RDMA_USER_CM_CMD_MIGRATE_ID, written on ch), with its queued events; from
// then on its events are reported on ch. It returns how many events of the
// id from had reported.
func (ch *Channel) MigrateID(id uint32, from *Channel) (uint32, error) {
	var resp ucmaMigrateResp
	var werr error
	// Control keeps the old channel's fd open while the kernel looks it up.
	err := from.rc.Control(func(oldFD uintptr) {
		cmd := ucmaMigrateID{Response: ptr64{unsafe.Pointer(&resp)}, ID: id, FD: uint32(oldFD)}
		werr = ucmaWrite(ch, "rdma_migrate_id", ucmaCmdMigrateID, &cmd, unsafe.Sizeof(resp))
	})
	if err != nil {
		return 0, from.pollErr("rdma_migrate_id", err)
	}
	if werr != nil {
		return 0, werr
	}
	return resp.EventsReported, nil
}
