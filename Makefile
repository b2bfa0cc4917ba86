# agentgw — build, test and the scripted runs.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
export PATH := /usr/local/go/bin:$(PATH)

GO ?= go
TEST_TIMEOUT ?= 45m

.PHONY: all build test vet deps demo bench fuzz soak clean

all: build

build:
	$(GO) build -o bin/agentgw ./cmd/agentgw

vet:
	$(GO) vet ./...

# Real-server suites start private Prosody/ejabberd instances; under CI=true
# a missing server binary fails instead of skipping. Outside CI they would
# skip, so test first installs what they need (install-deps is idempotent
# and takes about half a second when everything is present); NO_DEPS=1
# skips that on a machine without package access. go test prints the
# closing line.
#
# go test runs up to -p packages at once and, inside a package, up to
# -parallel tests that call t.Parallel() (the e2e/<area> suites and most
# unit suites: each test owns its servers and ports). At -p 2 -parallel 2
# the machine was busy only 56 % of the run (the end-to-end tests mostly
# wait on servers, kills and leases): 592 s. At -p 4 -parallel 4 it is
# busy 90 %, the same CPU (586 against 637 CPU-s) done in 341 s, and the
# critical path is e2e/cluster (about 240 s) after the compile
# (docs/design-notes.md, "make test's wall time: parallelism"). The longest
# end-to-end areas are named first so they start first. TEST_FLAGS='-p 1
# -parallel 1' for a serial run. The soak and the benchmarks are not part
# of it: make soak, make bench.
TEST_FLAGS ?= -p 4 -parallel 4
E2E_FIRST ?= ./e2e/cluster ./e2e/lease ./e2e/crash ./e2e/mcp ./e2e/messaging ./e2e/a2a ./e2e/acc ./e2e/console ./e2e/postgres
test: $(if $(NO_DEPS),,deps) vet
	$(GO) test -count=1 -vet=off -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(E2E_FIRST) ./...

deps:
	bash scripts/install-deps.sh

demo:
	bash scripts/demo.sh

bench:
	bash scripts/bench.sh

fuzz:
	bash scripts/fuzz.sh

soak:
	bash scripts/soak.sh

clean:
	rm -rf bin

# Rewrite the layout table of docs/design-notes.md from internal/archtest
# (the tiers) and the package doc comments; TestLayoutTable fails while it
# is stale.
.PHONY: layout
layout:
	$(GO) test -count=1 -run TestLayoutTable ./internal/archtest -update
