//go:build amd64 || arm64

package main

const haveCounter = true

// readCounter reads the CPU's counter: RDTSC, or CNTVCT_EL0.
func readCounter() uint64
