#!/usr/bin/env bash
# The README's test command: sets up the machine, builds everything, runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build --build-tests
COFFER_BIN="$(swift build --show-bin-path)/coffer" swift test --skip-build "$@"
