module example.com/rsocket-streamtest

go 1.26.0

require (
	github.com/pureverbs/pureverbs v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)

require (
	golang.org/x/net v0.63.0
	golang.org/x/sys v0.50.0 // indirect
)

// The tests exercise the qp/rsocket next to them.
replace github.com/pureverbs/pureverbs => ../..

tool github.com/pureverbs/pureverbs/tools/rxevm
