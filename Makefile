# Falcon's developer commands. `make test` is the one command that runs every
# test; CI runs exactly that (see .ci/run).
GO      ?= go
BIN     ?= bin/falcon
PKGS    ?= ./...

.PHONY: all build install test test-race bench fuzz generate verify fmt vet services kube-bins image

all: build

build:
	$(GO) build -o $(BIN) ./cmd/falcon

install:
	$(GO) install ./cmd/falcon

# The OCI image, bin/falcon-image.tar, without a Docker daemon: the static
# binary on an empty base, as user 65532 (hack/image, internal/ociimage).
# VERSION defaults to `git describe --tags --always --dirty`, the build time
# to SOURCE_DATE_EPOCH or the commit's, the platform to linux/amd64 (ARCH or
# GOARCH picks another; both are cleared for `go run`, which builds the tool
# itself for this machine).
image:
	env -u GOOS -u GOARCH $(GO) run ./hack/image -o bin/falcon-image.tar -version "$(VERSION)" -arch "$(or $(ARCH),$(GOARCH))"

# Every test: unit, store (SQLite and MariaDB), API over loopback, and the
# end-to-end suite that drives the built CLI against `falcon dev`.
test: kube-bins
	$(GO) test -count=1 -timeout 30m $(PKGS)

# Real Kubernetes control-plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok) for the edge-cluster tests,
# built once into $$HOME/.cache/falcon and rebuilt only when their pinned
# versions change. A cold build takes a long time on a small machine, so it
# runs here, outside any test timeout.
kube-bins:
	@./hack/kube-bins.sh >/dev/null

test-race: kube-bins
	$(GO) test -count=1 -race -timeout 30m $(PKGS)

# Figures: store throughput, list latency at 100k rows, dispatch latency,
# and a simulated day of node pools (reuse against a pool per job; -v prints
# the per-user table); reliability: the controller killed 50 times under 500
# experiments, 1000 aborts racing status updates per database, and the
# database stopped for 60s (docs/benchmarks.md, Reliability). The dispatch
# benchmark runs three times: one run's ratio to the ideal moves by a tenth
# on a two-core machine, so its median is the figure.
bench: kube-bins
	CI=true $(GO) test -run '^$$' -bench 'CreateExp|ListExps100k' -benchtime 3s -timeout 30m ./internal/store/sqlstore/
	$(GO) test -run '^$$' -bench SQLiteWriteOrder -benchtime 300x ./internal/store/sqlstore/
	$(GO) test -run '^$$' -bench SQLiteJobWritesUnderLoad -benchtime 2000x -count 2 ./internal/store/sqlstore/
	$(GO) test -run '^$$' -bench SQLiteListByIDs -benchtime 2000x ./internal/store/sqlstore/
	$(GO) test -run '^$$' -bench 'WalkSmallTree|ChecksumSmallFile' -benchtime 2000x ./internal/blobstore/
	$(GO) test -run '^$$' -bench . -benchtime 2s ./internal/resourcemanager/queue/
	$(GO) test -run '^$$' -bench SimulatedDay -benchtime 1x -timeout 30m -v ./internal/resourcemanager/
	$(GO) test -run '^$$' -bench Cycle10kLive -benchtime 20x -timeout 30m ./internal/resourcemanager/
	$(GO) test -run '^$$' -bench LocalLatency -benchtime 30x -timeout 10m ./e2e/
	$(GO) test -run '^$$' -bench ExpList100k -benchtime 20x -timeout 10m ./e2e/
	$(GO) test -run '^$$' -bench 'KubeDispatch$$' -benchtime 1x -count 3 -timeout 60m ./e2e/
	$(GO) test -run '^$$' -bench KubeDispatchCPU -benchtime 1x -timeout 30m ./e2e/
	CI=true $(GO) test -run '^$$' -bench PooledEnds -benchtime 1x -timeout 10m ./internal/provider/gke/
	$(GO) test -run '^$$' -bench Plan100kWaiting -benchmem -benchtime 20x -count 3 ./internal/resourcemanager/
	$(GO) test -run '^$$' -bench Results -benchtime 3x -timeout 30m ./e2e/
	$(GO) test -run '^$$' -bench ServerColdStart -benchtime 10x -timeout 10m ./e2e/
	$(GO) test -run '^$$' -bench WatchExpLatency -benchtime 1x -timeout 10m ./internal/apiserver/
	$(GO) test -run '^$$' -bench 'ExecDev|ExecKube' -benchtime 1x -timeout 30m ./e2e/
	$(GO) test -run '^$$' -bench ExpCompare100k -benchtime 5x -timeout 10m ./e2e/
	$(GO) test -run '^$$' -bench Metrics100k -benchtime 20x ./internal/compare/
	FALCON_LIST_FILES=100000 $(GO) test -count=1 -run '^TestListManyArtifactFiles$$' -timeout 10m -v ./internal/apiserver/
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/runmetrics/
	$(GO) test -run '^$$' -bench . -benchtime 500x ./internal/logjson/
	$(GO) test -run '^$$' -bench Export -benchtime 3x ./internal/cloudlog/
	FALCON_PROFILE_MIB=1024 $(GO) test -run '^$$' -bench Walk -benchtime 2x -timeout 30m ./internal/xplane/
	FALCON_PROFILE_MIB=1024 $(GO) test -run '^$$' -bench Analyze -benchtime 2x -timeout 30m ./internal/profile/
	FALCON_CRASH_EXPS=500 FALCON_CRASH_KILLS=50 $(GO) test -count=1 -run '^TestControllerKilledAtRandomPoints$$' -timeout 60m -v ./internal/provider/gke/
	FALCON_ABORT_RACE_ROUNDS=1000 CI=true $(GO) test -count=1 -run '^Test(SQLite|MySQL)$$/^AbortRacesStatusUpdate$$' -timeout 30m -v ./internal/store/sqlstore/
	FALCON_DB_OUTAGE=60s CI=true $(GO) test -count=1 -run '^TestDatabaseOutage$$' -timeout 30m -v ./e2e/

# Fuzzing: each target in turn, from its seed corpus in the package's
# testdata/fuzz/ (which `make test` replays as plain tests). FUZZTIME is at
# least 10^6 executions per target; a new crasher lands in testdata/fuzz/,
# where it belongs in the commit that fixes it. FUZZPAR workers per target;
# FUZZMIN bounds the minimising of each new input, which on a loaded machine
# can otherwise stall a run for minutes.
FUZZTIME ?= 1000000x
FUZZPAR  ?= 2
FUZZMIN  ?= 10s
FUZZ_TARGETS = \
	./internal/manifest/:FuzzParse \
	./internal/clusterconfig/:FuzzParse \
	./internal/validation/:FuzzExperiment \
	./internal/apiserver/:FuzzDecodeRequestBody \
	./internal/apiserver/:FuzzGatewayCreateExp

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name in $$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) -parallel $(FUZZPAR) -timeout 0 $$pkg; \
	done

generate:
	./hack/generate.sh

# Fails when generated code is stale, code is unformatted or vet complains.
verify: generate
	@test -z "$$(git status --porcelain -- api/)" || (git status --short -- api/; echo "generated code is stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w" >&2; exit 1)
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Starts the services the tests need if they are not running (MariaDB).
services:
	./hack/services.sh
