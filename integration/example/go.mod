module example.com/rxe-example

go 1.26.0

require github.com/pureverbs/pureverbs v0.0.0-00010101000000-000000000000

require (
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

// Inside the pureverbs repository the example tests the code next to it;
// a project of your own leaves this out and requires a released version.
replace github.com/pureverbs/pureverbs => ../..

tool github.com/pureverbs/pureverbs/tools/rxevm
