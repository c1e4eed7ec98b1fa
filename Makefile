# Falcon's developer commands. `make test` is the one command that runs every
# test; CI runs exactly that (see .ci/run).
GO      ?= go
BIN     ?= bin/falcon
PKGS    ?= ./...

.PHONY: all build install test test-race bench generate verify fmt vet services

all: build

build:
	$(GO) build -o $(BIN) ./cmd/falcon

install:
	$(GO) install ./cmd/falcon

# Every test: unit, store (SQLite and MariaDB), API over loopback, and the
# end-to-end suite that drives the built CLI against `falcon dev`.
test:
	$(GO) test -count=1 -timeout 20m $(PKGS)

test-race:
	$(GO) test -count=1 -race -timeout 30m $(PKGS)

# Figures: store throughput, list latency at 100k rows, dispatch latency.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 30m ./internal/store/sqlstore/ ./e2e/

generate:
	./hack/generate.sh

# Fails when generated code is stale, code is unformatted or vet complains.
verify: generate
	@git diff --exit-code -- api/ || (echo "generated code is stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w" >&2; exit 1)
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Starts the services the tests need if they are not running (MariaDB).
services:
	./hack/services.sh
