#!/usr/bin/env bash
# Builds the libFuzzer target Fuzz/MIMEFuzzer.swift (CofferMIME's parser and writer, compiled with swiftc
# -sanitize=fuzzer outside SwiftPM; the one lock type it uses comes from the swift-nio checkout that `swift build`
# resolved) into .build-fuzz/ and runs a fixed number of inputs from a fixed seed, starting from a generated corpus.
# Fails on a crash, a hang, a memory blow-up, or a broken invariant (parse, write, parse changes a field; a bare CR
# or LF, a broken header line or an unclosed multipart in the writer's output).
#
# Usage: Fuzz/mime.sh [SECONDS] [extra libFuzzer flags]   (default 45 s at most; FUZZ_RUNS sets the input count)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-45}"
shift || true
out=.build-fuzz
nio=.build/checkouts/swift-nio/Sources/NIOConcurrencyHelpers
if [ ! -f "$nio/NIOLockedValueBox.swift" ]; then
  echo "fuzz-mime: $nio is missing; run swift build first"
  exit 1
fi
rm -rf "$out/mime-corpus" "$out/mime-seeds"
mkdir -p "$out/mime-corpus" "$out/mime-seeds"
lock=("$nio/NIOLock.swift" "$nio/NIOLockedValueBox.swift" "$nio/lock.swift")
sources=(Sources/CofferMIME/*.swift)
stamp="$out/mime-sources.sha"
source Fuzz/swiftc-flags.sh
sum="$(cat "${lock[@]}" "${sources[@]}" Fuzz/MIMEFuzzer.swift Fuzz/mime.sh Fuzz/swiftc-flags.sh | sha256sum | cut -d' ' -f1)"
if [ ! -x "$out/MIMEFuzzer" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
  echo "fuzz-mime: building $out/MIMEFuzzer"
  swiftc "${swift_flags[@]}" -c -module-name NIOConcurrencyHelpers -emit-module \
    -emit-module-path "$out/NIOConcurrencyHelpers.swiftmodule" "${lock[@]}" -o "$out/NIOConcurrencyHelpers.o"
  swiftc "${swift_flags[@]}" -sanitize=fuzzer -I "$out" -module-name MIMEFuzzer "${sources[@]}" \
    Fuzz/MIMEFuzzer.swift "$out/NIOConcurrencyHelpers.o" -o "$out/MIMEFuzzer"
  echo "$sum" >"$stamp"
fi
# Seeds: the differential test's generated corpus (its own fixed seed), one message a file.
python3 Tests/CofferMIMETests/make_corpus.py "$out/mime-seeds" 120 20261126 >/dev/null
# And a few tails of mailto: links, which the target also reads each input as.
printf '%s' 'a@example.org,b@example.org?cc=c@example.net&subject=Gr%C3%BC%C3%9Fe%20aus%20K%C3%B6ln&body=Hi%0D%0A%0D%0A--%20me' \
  >"$out/mime-seeds/mailto-1"
printf '%s' '?to=%22Smith%2C%20Bob%22%20%3Cbob@example.org%3E&bcc=x@example.net&in-reply-to=%3Cp.1@example.org%3E' \
  >"$out/mime-seeds/mailto-2"
printf '%s' 'x@example.org?subject=a%20b&body=%E2%80%A8tab%09end%0Aline%0Dcr' >"$out/mime-seeds/mailto-3"
# An attachment type over the writer's 127 bytes, which the parser reads: the harness must send it as
# application/octet-stream, as the app's forward does (a CI run found this after 12,000 inputs).
{
  printf 'From: <a@example.com>\r\nTo: b@example.com\r\nSubject: long type\r\nMIME-Version: 1.0\r\n'
  printf 'Content-Type: multipart/mixed; boundary="b1"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nhi\r\n'
  printf -- '--b1\r\nContent-Type: applic%sation/pdf; name="x.pdf"\r\n' "$(printf 'u%.0s' $(seq 125))"
  printf 'Content-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--b1--\r\n'
} >"$out/mime-seeds/long-type"
log="$out/mime-fuzz.log"
set +e
"$out/MIMEFuzzer" "$out/mime-corpus" "$out/mime-seeds" -seed=20261126 -runs="${FUZZ_RUNS:-25000}" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -max_len=8192 -artifact_prefix="$out/mime-" \
  -print_final_stats=1 "$@" >"$log" 2>&1
status=$?
set -e
if [ $status -ne 0 ]; then
  tail -60 "$log"
  echo "fuzz-mime: 0 passed, 1 failed (libFuzzer exited with $status; the input is in $out/)"
  exit 1
fi
runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)"
echo "fuzz-mime: $runs inputs, no crash, no hang, parse-write-parse stable"
