# pureverbs — see README.md. `make demo` and `make test` each set up what
# they need (qemu, Debian's kernel, rdma-core's tools), cached in .cache/.

GO      ?= go
CACHE   ?= $(CURDIR)/.cache/rxevm
RXEVM   := $(CACHE)/rxevm-host
RUN     ?= .
# go test's own limit for the test binary inside the VM.
ITIMEOUT ?= 20m
export RXEVM_CACHE := $(CACHE)

# Tests in the VM, written once: $(call vmtest,RUN-REGEXP[,COUNT[,TIMEOUT[,PACKAGES]]]), after any
# RXEVM_* settings the target needs; PACKAGES default to the integration tests.
vmtest = CGO_ENABLED=0 $(GO) test -tags integration -count=$(or $(2),1) -p 1 -timeout $(or $(3),$(ITIMEOUT)) \
	-exec '$(RXEVM) exec' -run '$(1)' -v $(or $(4),./integration/)

.PHONY: profile-insn bench-perftest bench-stream itest-stream faults soak-server bench-server all setup demo demo-faults outside-module test test-all itest-bare check unit itest itest-arm64 itest-matrix itest-twovm itest-selfcheck itest-example soak bench bench-vm test-host rxevm fuzz

all: test

# Static (it copies itself into no image, but stays runnable anywhere), and
# renamed into place so a concurrent run never executes a half-written file.
$(RXEVM): FORCE
	@mkdir -p $(CACHE)
	@CGO_ENABLED=0 $(GO) build -o $(RXEVM).tmp.$$$$ ./tools/rxevm && mv -f $(RXEVM).tmp.$$$$ $(RXEVM)

FORCE:

rxevm: $(RXEVM)

## setup: install qemu and kmod if missing, fetch and unpack the kernel and rdma-core's tools
setup: $(RXEVM)
	$(RXEVM) setup

## demo: boot the VM, stream frames from rocev2-send to rocev2-server over a veth pair, print the rate and the verdict (every frame counted, none lost, out of order or corrupt)
demo: setup
	$(RXEVM) run -timeout 5m -- /usr/local/bin/rocev2-demo

## demo-faults: the demo must fail, naming the fault, when rocev2-send drops a frame (-drop) or corrupts one (-corrupt)
demo-faults: setup
	@for fault in 'drop 100:1 lost' 'corrupt 200:1 corrupt'; do \
		flags=$${fault%%:*}; want=$${fault#*:}; \
		out=$$($(RXEVM) run -timeout 5m -- /usr/local/bin/rocev2-demo -- -$$flags 2>&1); rc=$$?; \
		if [ $$rc -eq 0 ]; then echo "$$out"; echo "demo-faults: the demo passed with rocev2-send -$$flags"; exit 1; fi; \
		if ! echo "$$out" | grep -q "rocev2-demo: verdict: $$want"; then \
			echo "$$out"; echo "demo-faults: -$$flags: no 'verdict: $$want' line"; exit 1; fi; \
		echo "demo-faults: rocev2-send -$$flags: $$(echo "$$out" | grep 'rocev2-demo: verdict:') (exit $$rc)"; \
	done

## outside-module: a module in a temporary directory runs the README's "Testing your own module" commands against this commit, published to a file-based module proxy (.ci/outside-module; OUTSIDE_ARCHS="amd64 arm64")
outside-module: setup
	.ci/outside-module $(OUTSIDE_ARCHS)

## test: static checks, host unit tests (race detector), then the VM integration tests
test: check unit itest itest-twovm itest-selfcheck itest-example itest-stream itest-bare

## test-all: make test, then the suite on Debian 13's kernel (6.12, itest-matrix) and on arm64 (itest-arm64): every part runs and is timed, any failure fails it; .ci/run runs this
TESTALL ?= test itest-matrix itest-arm64
test-all:
	@status=0; summary=""; \
	for t in $(TESTALL); do \
		start=$$(date +%s); \
		$(MAKE) --no-print-directory $$t; rc=$$?; \
		summary="$$summary\ntest-all: make $$t: exit $$rc after $$(( $$(date +%s) - start )) s"; \
		[ $$rc -eq 0 ] || status=1; \
	done; \
	printf "$$summary\n"; exit $$status

## check: cgo-free, gofmt-clean, vet-clean on amd64 and arm64
check:
	@if git ls-files '*.go' | xargs grep -lE '^[[:space:]]*import[[:space:]]+"C"|^[[:space:]]*"C"$$'; then \
		echo 'a package imports "C": pureverbs is cgo-free'; exit 1; fi
	@out=$$(git ls-files -co --exclude-standard '*.go' | xargs gofmt -l); \
		if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet ./...
	$(GO) vet -tags integration ./integration/
	cd integration/example && $(GO) vet ./... && GOARCH=arm64 $(GO) vet ./...
	cd integration/streamtest && $(GO) vet ./... && GOARCH=arm64 $(GO) vet ./...

## unit: host tests (no RDMA needed; netpoll's namespace tests need root), and every benchmark once so none rots;
## the ABI pins compile against Debian 13's uapi headers with gcc (`rxevm uapi` fetches them and installs gcc if missing)
unit: $(RXEVM)
	@inc=$$($(RXEVM) uapi) && echo "ABI pins: PUREVERBS_UAPI_INCLUDE=$$inc" && \
	PUREVERBS_UAPI_INCLUDE=$$inc $(GO) test -race -count=1 ./... && \
	PUREVERBS_UAPI_INCLUDE=$$inc $(GO) test -count=1 -run '^$$' -bench . -benchtime=1x ./...
	cd integration/example && $(GO) test -count=1 ./...

## itest: the integration tests inside the VM; RUN=regexp picks tests by name
itest: setup
	$(call vmtest,$(value RUN))

## itest-arm64: the integration tests on Debian's arm64 kernel under qemu-system-aarch64 (TCG); not part of make test
# ARMCOUNT=n runs each test n times in one boot (the ten-in-a-row check: README, arm64).
itest-arm64: rxevm
	RXEVM_ARCH=arm64 $(RXEVM) setup
	RXEVM_ARCH=arm64 GOARCH=arm64 $(call vmtest,$(value RUN),$(ARMCOUNT),$(or $(ARMTIMEOUT),60m))
	cd integration/example && GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -timeout $(ITIMEOUT) \
		-exec 'env -u GOARCH $(GO) tool rxevm exec' -v ./...

## itest-matrix: the integration tests again on Debian 13's kernel (trixie, 6.12) with its rdma-core 56 tools; not part of make test
itest-matrix:
	RXEVM_SUITE=trixie $(MAKE) itest

## itest-twovm: the tests written for two hosts, on two VMs joined by a QEMU socket netdev
itest-twovm: setup
	RXEVM_TOPOLOGY=twovm $(call vmtest,TwoVM)

## itest-bare: the guest as a minimal host — rdma_rxe on disk, not loaded, no links — where rxe-link loads it (modules.dep, finit_module) and adds, lists and deletes a link
itest-bare: setup
	RXEVM_TOPOLOGY=none RXEVM_UNLOADED=rdma_rxe,crc32_generic $(call vmtest,^TestRxeLinkTool$$)

## itest-example: the example module's tests, run the way another project runs them: go tool rxevm exec from its own directory; then the godoc examples of the main paths (RC send/receive, RDMA CM Dial/Listen, the server's Serve, rsocket's Dial/Listen; skipped on hosts without rxe), output checked, in the VM, with the packages' own TestVM* tests (internals that only the VM reaches)
itest-example: setup
	cd integration/example && CGO_ENABLED=0 $(GO) test -count=1 -timeout $(ITIMEOUT) -exec '$(GO) tool rxevm exec' -v ./...
	$(call vmtest,^(Example|TestVM),,,./qp/ ./qp/rdmacm/ ./qp/rsocket/ ./server/)

## itest-stream: qp/rsocket under programs written for TCP (integration/streamtest, a module of its own with x/net and grpc-go): nettest.TestConn and gRPC unary and streaming calls, in the VM via go tool rxevm exec
itest-stream: setup
	cd integration/streamtest && CGO_ENABLED=0 $(GO) test -count=1 -timeout $(ITIMEOUT) -exec '$(GO) tool rxevm exec' -v ./...

## itest-selfcheck: a deliberately failing test must make the harness fail, visibly
itest-selfcheck: setup
	@out=$$(RXEVM_SELFCHECK=1 $(call vmtest,^TestHarnessSelfcheck$$) 2>&1); rc=$$?; \
	if [ $$rc -eq 0 ]; then echo "$$out"; echo "selfcheck: a failing test passed through the harness"; exit 1; fi; \
	if ! echo "$$out" | grep -q 'deliberate failure seen by the harness'; then \
		echo "$$out"; echo "selfcheck: the failure was not shown"; exit 1; fi; \
	echo "selfcheck: a failing integration test fails the run (exit $$rc) and shows its message"

## soak: the long message-stream tests
soak: setup
	RXEVM_SOAK=1 $(MAKE) itest RUN='$(or $(SOAKRUN),Soak)' ITIMEOUT=60m

## soak-server: stream 1 000 000 frames through the server sampling heap, RSS, allocations, goroutines and fds, then 15 senders in a row (not part of make test)
soak-server: setup
	RXEVM_SOAK=1 $(MAKE) itest RUN='TestServerSoak' ITIMEOUT=60m

## faults: the netem fault tests at full size (10^5 frames per fault; the normal suite runs short versions), not part of make test
faults: setup
	RXEVM_FAULTS=1 $(MAKE) itest RUN='$(or $(FAULTRUN),^TestNetem)' ITIMEOUT=120m

# The bench targets' tests print their tables as Markdown sections, headed by commit, kernel, mode and date,
# and splice writes each into its tool's README between its markers (integration/internal/benchmd);
# the run's output passes through and its exit status is kept.
# BENCHICOUNT=shift=0,sleep=off,align=off measures on QEMU's instruction-counted clock (RXEVM_ICOUNT) with one
# vCPU (its event rows repeat more closely than with two): the host's load does not move the figures. A polling
# end would measure the guest's timer tick or QEMU's vCPU slices, so perftest runs with -e and the polling rows
# and the server bench are skipped. Empty: TCG on the host's clock.
BENCHICOUNT ?=
BENCHENV = RXEVM_BENCH=1 RXEVM_BENCH_MARKDOWN=1 RXEVM_BENCH_COMMIT=$$(git rev-parse --short=12 HEAD)$$(git diff --quiet HEAD -- . ':!*.md' || echo -dirty) \
	$(if $(BENCHICOUNT),RXEVM_ICOUNT=$(BENCHICOUNT) RXEVM_CPUS=1 RXEVM_BENCH_PERFTEST_FLAGS=-e)
SPLICE   = $(GO) run ./integration/internal/benchmd/splice

## bench-server: Go server vs perftest ib_send_bw server at 64 B..9000 B, in one boot; the table goes into tools/rocev2-server/README.md
bench-server: setup
	{ $(BENCHENV) $(MAKE) itest RUN='TestRoCEv2ReceiverBench' ITIMEOUT=30m 2>&1; echo "bench-exit $$?"; } | $(SPLICE) tools/rocev2-server/README.md

## fuzz: run every fuzz target for FUZZTIME each (their seeds run in make unit anyway)
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "$$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

## bench: host benchmarks (simulated rings, netpoll)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-perftest: the Go perftest against Debian's, every test at 64 B / 4 KiB / 64 KiB, 5 interleaved rounds, PERFTEST-RATIO lines; the table goes into tools/perftest/README.md
bench-perftest: setup
	{ $(BENCHENV) $(MAKE) itest RUN='TestPerftestBench' ITIMEOUT=60m 2>&1; echo "bench-exit $$?"; } | $(SPLICE) tools/perftest/README.md

## bench-stream: Go rstream vs librdmacm's rstream at 64 B..64 KiB (FULL=1: and 1 MiB), latency and bandwidth, both roles, 5 interleaved rounds, STREAM-RATIO lines with TCP beside; BENCHICOUNT=... measures on the instruction-counted clock with both ends blocking (-T b)
bench-stream: setup
	RXEVM_BENCH=1 $(if $(FULL),RXEVM_BENCH_FULL=1) $(if $(BENCHICOUNT),RXEVM_ICOUNT=$(BENCHICOUNT) RXEVM_CPUS=1) $(MAKE) itest RUN='^TestRstreamBench$$' ITIMEOUT=60m

## bench-vm: Go and C side by side in one VM boot (rc-pingpong, the server, perftest); the tables go into the tools' READMEs
bench-vm: setup
	{ $(BENCHENV) $(MAKE) itest RUN='^Test(Bench.*|PerftestBench|SideBySide.*|RoCEv2ReceiverBench)$$' ITIMEOUT=90m 2>&1; echo "bench-exit $$?"; } | \
		$(SPLICE) tools/rc-pingpong/README.md tools/rocev2-server/README.md tools/perftest/README.md

## profile-insn: where a perftest pair's guest instructions go, per process, object and symbol: QEMU's insnprof plugin (integration/testdata/insnprof) counts them in four -icount boots, C's client and Go's against C's server, each at PROFITERS and twice that, and integration/internal/insnprof names them; PROFTOOL (ib_read_lat), PROFSIZE (64), RXEVM_SUITE picks the kernel
PROFTOOL  ?= ib_read_lat
PROFSIZE  ?= 64
PROFITERS ?= 30000
# PROFCLIENTS=go boots only Go's again; the report reads C's earlier boots.
PROFCLIENTS ?= c go
PROFDIR    = $(CURDIR)/.cache/insnprof/$(PROFTOOL)-$(PROFSIZE)-$(or $(RXEVM_SUITE),bookworm)
profile-insn: setup
	@mkdir -p $(PROFDIR)
	$(RXEVM) uapi >/dev/null # installs gcc if missing
	gcc -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden -o $(PROFDIR)/insnprof.so integration/testdata/insnprof/insnprof.c
	# The Go tool's code at an address of its own: the profile keys code by address, and the test binary is Go too.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-T=0x20001000 -o $(PROFDIR)/perftest ./tools/perftest
	@for c in $(PROFCLIENTS); do for n in $(PROFITERS) $$(( 2 * $(PROFITERS) )); do \
		echo "profile-insn: $$c client, $$n iterations"; \
		RXEVM_PLUGIN=$(PROFDIR)/insnprof.so,out=$(PROFDIR)/$$c-$$n.prof RXEVM_EXTRA=$(PROFDIR)/perftest:/usr/local/bin/perftest \
		RXEVM_ICOUNT=shift=0,sleep=off,align=off RXEVM_CPUS=1 RXEVM_INSNPROF=$(PROFTOOL) RXEVM_INSNPROF_CLIENT=$$c \
		RXEVM_INSNPROF_ITERS=$$n RXEVM_INSNPROF_SIZE=$(PROFSIZE) $(call vmtest,^TestInsnProfile$$) >$(PROFDIR)/$$c-$$n.log 2>&1 || \
			{ tail -40 $(PROFDIR)/$$c-$$n.log; exit 1; }; \
	done; done
	$(GO) run ./integration/internal/insnprof -root $(CACHE)/peers$(if $(filter trixie,$(RXEVM_SUITE)),-trixie) -root / \
		$(foreach c,c go,$(PROFDIR)/$(c)-$(PROFITERS) $(PROFDIR)/$(c)-$(shell echo $$((2 * $(PROFITERS)))))

## test-host: the integration tests on this machine, when it has rdma_rxe itself (no VM)
test-host:
	$(GO) run ./tools/rxevm host-setup
	$(GO) test -tags integration -count=1 -p 1 -run '$(value RUN)' -v ./integration/; rc=$$?; \
		$(GO) run ./tools/rxevm host-teardown; exit $$rc
