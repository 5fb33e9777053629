#!/usr/bin/env bash
# The README's run command: builds coffer and runs its tour on a throwaway home folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build -c release --product coffer
exec .build/release/coffer "$@"
