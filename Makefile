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
test: $(if $(NO_DEPS),,deps) vet
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

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
