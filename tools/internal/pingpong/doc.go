// Package pingpong holds what rdma-core's pingpong examples share, for the
// Go tools that speak their protocols (rc-pingpong, uc-pingpong,
// ud-pingpong, and srq-pingpong's options and output): the command line
// every one of them has, the verbs objects of a one-QP end, the 52-byte
// address exchange over TCP, the exchange's bookkeeping and its completion
// loop, and the output lines.
package pingpong
