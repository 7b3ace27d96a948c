// Package pingpong holds what rdma-core's pingpong examples share, for the
// Go tools that speak their protocols (ud-pingpong, uc-pingpong): the
// getopt_long command line, the 52-byte address exchange over TCP, the
// exchange's bookkeeping and its completion loop, and the output lines.
package pingpong
