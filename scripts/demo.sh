#!/usr/bin/env bash
# make demo: install what is missing, build agentgw, and run the narrated
# demo (private Prosody, agentgw on SQLite, three agents, a scripted caller
# session). Everything it starts is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
bash scripts/install-deps.sh
go build -o bin/agentgw ./cmd/agentgw
exec go run ./tools/demo
