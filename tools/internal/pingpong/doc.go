// Package pingpong holds what rdma-core's pingpong examples share, for the
// Go tools that speak their protocols (rc-pingpong, uc-pingpong,
// ud-pingpong, and srq-pingpong's options and output): the 52-byte address
// exchange over TCP, the exchange's bookkeeping and its completion loop,
// option values, and the output lines.
package pingpong
