// Package streamtest holds tests of qp/rsocket with programs written for
// TCP: golang.org/x/net/nettest's conformance suite and grpc-go. It is a
// module of its own so that the pureverbs module does not depend on them.
// Run it in the VM the way another project would:
//
//	go test -exec 'go tool rxevm exec' ./...
package streamtest
