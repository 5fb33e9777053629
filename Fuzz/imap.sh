#!/usr/bin/env bash
# Builds the libFuzzer target Fuzz/IMAPFuzzer.swift (CofferIMAP's response parser, compiled with swiftc
# -sanitize=fuzzer outside SwiftPM) into .build-fuzz/ and runs a fixed number of inputs from a fixed seed. Fails on
# a crash, a hang, a memory blow-up, or a broken invariant (whole and piecewise feeding disagree, a body chunk or the
# buffer over its bound).
#
# Usage: Fuzz/imap.sh [SECONDS] [extra libFuzzer flags]   (default 25 s at most; FUZZ_RUNS sets the input count)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-25}"
shift || true
out=.build-fuzz
rm -rf "$out/imap-corpus"
mkdir -p "$out/imap-corpus"
sources=(Sources/CofferIMAP/{IMAPError,IMAPResponse,IMAPResponseParser,ResponseGrammar,IMAPCommand,UIDSet}.swift)
stamp="$out/imap-sources.sha"
source Fuzz/swiftc-flags.sh
sum="$(cat "${sources[@]}" Fuzz/IMAPFuzzer.swift Fuzz/imap.sh Fuzz/swiftc-flags.sh | sha256sum | cut -d' ' -f1)"
if [ ! -x "$out/IMAPFuzzer" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
  echo "fuzz-imap: building $out/IMAPFuzzer"
  swiftc "${swift_flags[@]}" -sanitize=fuzzer \
    -module-name IMAPFuzzer "${sources[@]}" Fuzz/IMAPFuzzer.swift -o "$out/IMAPFuzzer"
  echo "$sum" >"$stamp"
fi
log="$out/imap-fuzz.log"
set +e
"$out/IMAPFuzzer" "$out/imap-corpus" -seed=20261122 -runs="${FUZZ_RUNS:-200000}" -max_total_time="$seconds" \
  -timeout=10 -rss_limit_mb=1024 -max_len=4096 -artifact_prefix="$out/imap-" -print_final_stats=1 "$@" >"$log" 2>&1
status=$?
set -e
if [ $status -ne 0 ]; then
  tail -60 "$log"
  echo "fuzz-imap: 0 passed, 1 failed (libFuzzer exited with $status; the input is in $out/)"
  exit 1
fi
runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)"
echo "fuzz-imap: $runs inputs, no crash, no hang, whole and piecewise parses agree"
