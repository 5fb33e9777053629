#!/usr/bin/env bash
# The README's test command: sets up the machine, builds everything, runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
swift build --build-tests
COFFER_BIN="$(swift build --show-bin-path)/coffer" swift test --skip-build "$@"
# libFuzzer on parse + sanitize for a minute: no crash, no hang, idempotent, nothing unsafe in the output.
bash Fuzz/run.sh 60
# The sanitized DOMPurify and HTTP-leak vectors in headless Chromium under the CSP: no request, no script.
.venv/bin/python Tests/browser/render_vectors.py --coffer "$(swift build --show-bin-path)/coffer"
