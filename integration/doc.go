// Package integration holds the tests that need real rdma_rxe. They build
// only with -tags integration and run inside the rxevm VM (make itest) or,
// on a host that has rdma_rxe, after `rxevm host-setup` (make test-host).
package integration
