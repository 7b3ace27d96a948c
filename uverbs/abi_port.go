package uverbs

// Raw struct and ids of UVERBS_METHOD_QUERY_PORT (<rdma/ib_user_ioctl_cmds.h>,
// <rdma/ib_user_ioctl_verbs.h>). Pinned by abi_port_test.go.

const (
	methodQueryPort = 2 // UVERBS_METHOD_QUERY_PORT

	attrQueryPortPortNum = 0 // UVERBS_ATTR_QUERY_PORT_PORT_NUM
	attrQueryPortResp    = 1 // UVERBS_ATTR_QUERY_PORT_RESP
)

// queryPortRespEx is struct ib_uverbs_query_port_resp_ex. Debian 12's
// header ends it with reserved[6]; rdma-core's headers since v49 (and the
// kernels they follow) split that into reserved[2] and active_speed_ex,
// which older kernels leave zero.
type queryPortRespEx struct {
	Legacy        queryPortResp
	PortCapFlags2 uint16
	Reserved      [2]uint8
	ActiveSpeedEx uint32
}
