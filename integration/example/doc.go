// Package example is a module of its own that tests with pureverbs the way
// any other project would: its go.mod adds rxevm as a tool (go get -tool
// github.com/pureverbs/pureverbs/tools/rxevm), its tests build their rxe
// devices with rxetest, and
//
//	CGO_ENABLED=0 go test -exec 'go tool rxevm exec' ./...
//
// runs them inside a VM with rdma_rxe, on a host that has none.
package example
