#!/usr/bin/env bash
# The README's run command: builds coffer and runs its tour on a throwaway home folder. With --server, the server
# tour instead (scripts/tour-server.sh): Dovecot, coffer-notify and the agent, push and FastSync end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${1:-}" = "--server" ]; then exec bash scripts/tour-server.sh; fi
# `coffer` becomes `coffer-core` (beside it) for every command but a read through a running agent: both are built.
swift build -c release --static-swift-stdlib --product coffer-core
swift build -c release --static-swift-stdlib --product coffer
exec .build/release/coffer "$@"
