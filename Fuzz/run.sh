#!/usr/bin/env bash
# Builds the libFuzzer target Fuzz/SanitizerFuzzer.swift (CofferHTML + CofferContent compiled with swiftc
# -sanitize=fuzzer, outside SwiftPM) into .build-fuzz/ and runs it for a bounded time, seeded from the DOMPurify and
# HTTP-leak corpora. Fails on a crash, a hang (-timeout), a memory blow-up, or a broken invariant (idempotence, no
# script or remote URL in the output).
#
# Usage: Fuzz/run.sh [SECONDS] [extra libFuzzer flags]   (default 60 s; FUZZ_ASAN=1 adds AddressSanitizer)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
out=.build-fuzz
# A fresh corpus each run, so the run depends only on the seeds and the fixed seed below.
rm -rf "$out/corpus"
mkdir -p "$out/corpus" "$out/seeds"
sanitizers="fuzzer"
[ "${FUZZ_ASAN:-0}" = "1" ] && sanitizers="fuzzer,address"
source Fuzz/swiftc-flags.sh
flags=("${swift_flags[@]}" -sanitize="$sanitizers")

# Rebuild only when a source changed.
stamp="$out/sources.sha"
sources=(Sources/CofferHTML/*.swift Sources/CofferContent/*.swift Fuzz/SanitizerFuzzer.swift)
sum="$(cat "${sources[@]}" Fuzz/run.sh Fuzz/swiftc-flags.sh | sha256sum | cut -d' ' -f1)-$sanitizers"
if [ ! -x "$out/SanitizerFuzzer" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
  echo "fuzz: building $out/SanitizerFuzzer"
  swiftc "${flags[@]}" -c -module-name CofferHTML -emit-module -emit-module-path "$out/CofferHTML.swiftmodule" \
    Sources/CofferHTML/*.swift -o "$out/CofferHTML.o"
  swiftc "${flags[@]}" -c -module-name CofferContent -I "$out" -emit-module \
    -emit-module-path "$out/CofferContent.swiftmodule" Sources/CofferContent/*.swift -o "$out/CofferContent.o"
  swiftc "${flags[@]}" -module-name SanitizerFuzzer -I "$out" Fuzz/SanitizerFuzzer.swift \
    "$out/CofferHTML.o" "$out/CofferContent.o" -o "$out/SanitizerFuzzer"
  echo "$sum" >"$stamp"
fi

# Seeds: every DOMPurify payload, HTTP-leak vector and CSS-substitution vector, one file each.
python3 - "$out/seeds" <<'PY'
import hashlib, json, pathlib, sys
folder = pathlib.Path(sys.argv[1])
data = pathlib.Path("Tests/Fixtures")
payloads = [case["payload"] for case in json.loads((data / "dompurify/expect.json").read_text())]
payloads += [v["payload_html"] for v in json.loads((data / "httpleaks/httpleaks.json").read_text())["vectors"]]
payloads += [v["html"] for v in json.loads((data / "css-substitution/vectors.json").read_text())["vectors"]]
for payload in payloads:
    raw = payload.encode("utf-8")
    (folder / hashlib.sha1(raw).hexdigest()).write_bytes(raw)
PY

echo "fuzz: running for ${seconds} s"
log="$out/fuzz.log"
set +e
# A fixed seed and a bounded number of runs make CI repeatable: the same inputs in the same order on every machine
# (the time limit is only a safety net). Pass -seed=0 -runs=-1 to explore freely.
"$out/SanitizerFuzzer" "$out/corpus" "$out/seeds" -seed=20261122 -runs="${FUZZ_RUNS:-150000}" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=16384 -dict=Fuzz/html.dict -artifact_prefix="$out/" -print_final_stats=1 "$@" >"$log" 2>&1
status=$?
set -e
grep -E "^#[0-9]+ +(INITED|DONE)|stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added" "$log" || true
if [ $status -ne 0 ]; then
  tail -60 "$log"
  echo "fuzz: 0 passed, 1 failed (libFuzzer exited with $status; the input is in $out/)"
  exit 1
fi
runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)"
echo "fuzz: $runs inputs, no crash, no hang, idempotent"
