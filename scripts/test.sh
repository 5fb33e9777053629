#!/usr/bin/env bash
# The README's test command: sets up the machine, builds everything, runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# One lock type, the one ThreadSanitizer sees (docs/ARCHITECTURE.md, "Locks"): no Synchronization.Mutex.
if grep -rnE '\bMutex *(<|\()' Sources Tests Fuzz; then
  echo "test: use NIOLockedValueBox or NIOLock, not Synchronization.Mutex (ThreadSanitizer cannot see its waits)" >&2
  exit 1
fi
swift build --build-tests
# The network suites, the TPM suites and coffer-notify's: each in a run of its own, below.
network='CofferIMAPTests|CofferTransportTests|CofferSyncTests|CofferSMTPTests|CofferOutboxTests'
tpm='CofferTPMTests|TPMCLITests'
notify='CofferNotifyTests|CofferNotifyClientTests'
COFFER_BIN="$(swift build --show-bin-path)/coffer" swift test --skip-build --skip "$network|$tpm|$notify" "$@"
# The network suites (a private Dovecot and TLS servers on 127.0.0.1) run on their own: certificate validation runs
# on Swift's cooperative thread pool, which the CLI suites' blocking process waits can starve on a 2-core machine
# for longer than a handshake timeout. CofferSyncTests also runs `coffer` against the test Dovecot; CofferSMTPTests
# sends through its submission service and a private Postfix (Tests/servers/postfix.py); CofferOutboxTests sends
# from the outbox and through `coffer compose`, `reply` and `send` to it.
COFFER_BIN="$(swift build --show-bin-path)/coffer" swift test --skip-build --filter "$network" \
  --skip "StreamedSubmissionTests|LargeFolderTests|ServerOwnerTests" "$@"
# A killed owner's servers are stopped by the harness's watcher: two more server starts, alone, since in the network
# suites' burst of starts they made other tests' handshakes time out.
swift test --skip-build --filter ServerOwnerTests "$@"
# The 100,000-message folder on its own: its sync keeps both cores busy (one batch parsed and sealed while the one
# before is written), and beside it the SMTP suites' TLS handshakes timed out.
swift test --skip-build --filter LargeFolderTests "$@"
# The 25 MB send measures this process's resident set while it sends: alone, so no other suite's allocations count.
swift test --skip-build --filter StreamedSubmissionTests "$@"
# The TPM suites (a private swtpm per test on 127.0.0.1): their TPM calls and PIN KDFs hold the pool too.
COFFER_BIN="$(swift build --show-bin-path)/coffer" swift test --skip-build --filter "$tpm" "$@"
# coffer-notify's suites run apart from those for the same reason (the service answers from this process, and its
# IMAP logins verify certificates on the same pool; together, registrations timed out). They get besides: a private
# PostgreSQL cluster on loopback (scripts/postgres.sh, stopped at the end) for the storage conformance suite on both
# engines, two instances on one database and `--config`; Playwright's Chromium for the /account page; schemathesis
# over docs/notify-openapi.yaml against a live coffer-notify.
eval "$(bash scripts/postgres.sh start | sed 's/^/export /')"
trap 'bash scripts/postgres.sh stop "$COFFER_TEST_POSTGRES_DIR"' EXIT
COFFER_BIN="$(swift build --show-bin-path)/coffer" COFFER_NOTIFY_BIN="$(swift build --show-bin-path)/coffer-notify" \
  COFFER_ACCOUNT_BROWSER_PYTHON="$PWD/.venv/bin/python" COFFER_SCHEMATHESIS="$PWD/.venv/bin/schemathesis" \
  swift test --skip-build --filter "$notify" "$@"
bash scripts/postgres.sh stop "$COFFER_TEST_POSTGRES_DIR"
trap - EXIT
# The server tour on the binaries just built: Dovecot, coffer-notify and the agent, push to remote logout.
COFFER_TOUR_BIN="$(swift build --show-bin-path)" bash scripts/tour-server.sh
# libFuzzer on parse + sanitize for a minute: no crash, no hang, idempotent, nothing unsafe in the output.
bash Fuzz/run.sh 60
# libFuzzer on the IMAP response parser: a fixed seed and 200,000 inputs.
bash Fuzz/imap.sh 25
# libFuzzer on CofferMIME's writer (parse-write-parse stable) and mailto: links: a fixed seed and 25,000 inputs.
bash Fuzz/mime.sh 45
# The benchmark regression guard: a small corpus, ratios only (Coffer beside its same-run reference), failing when
# one falls below half its recorded baseline twice (Benchmarks/check-baselines.txt).
"$(swift build --show-bin-path)/coffer-bench" --check
# The sanitized DOMPurify and HTTP-leak vectors in headless Chromium under the CSP: no request, no script.
.venv/bin/python Tests/browser/render_vectors.py --coffer "$(swift build --show-bin-path)/coffer"
# ThreadSanitizer over the concurrency suites (keychain, keymaker, containers, agent). The agent tests run a
# TSan-built `coffer`, whose reports go to files: any report fails the run.
swift build --build-tests --sanitize=thread --scratch-path .build-tsan
# The run takes about three minutes, and is bounded at ten. A run past the bound gets, before it is killed, a stack
# of every thread of each of its processes (the test process, found by its path under .build-tsan, and any `coffer` it
# started), then the tests that had started and not ended (CONTRIBUTING, "ThreadSanitizer"). A run killed after its
# passing summary line is reported as a hang at exit, not as a failure; without that line it fails.
tsan_logs="$(mktemp -d)"
COFFER_BIN="$PWD/.build-tsan/debug/coffer" TSAN_OPTIONS="log_path=$tsan_logs/tsan halt_on_error=0" \
  swift test --skip-build --sanitize=thread --scratch-path .build-tsan \
  --filter 'CofferKeychainTests|CofferKeymakerTests|CofferAppTests|AgentTests' >"$tsan_logs/run.txt" 2>&1 &
tsan_pid=$!
tsan_waited=0
while kill -0 "$tsan_pid" 2>/dev/null && [ "$tsan_waited" -lt 600 ]; do
  sleep 5
  tsan_waited=$((tsan_waited + 5))
done
tsan_hung=0
if kill -0 "$tsan_pid" 2>/dev/null; then
  tsan_hung=1
  for pid in $(pgrep -f "$PWD/.build-tsan/"); do
    echo "== process $pid: $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-300)"
    # `|| true`: under pipefail, a process that ended meanwhile (no stack to print) must not stop the script.
    timeout 120 gdb -p "$pid" -batch -ex 'thread apply all bt 25' 2>&1 | grep -E '^(Thread|#)' | cut -c1-220 || true
  done >"$tsan_logs/stacks.txt" 2>&1
  # The test processes first: `swift test` then passes on all they printed, and ends.
  pkill -KILL -f "$PWD/.build-tsan/" || true
  sleep 10
  kill "$tsan_pid" 2>/dev/null || true
fi
set +e
wait "$tsan_pid"
tsan_status=$?
set -e
cat "$tsan_logs/run.txt"
if [ "$tsan_hung" = 1 ]; then
  echo "tsan: the stacks of every thread of the run's processes, at ten minutes:"
  head -c 400000 "$tsan_logs/stacks.txt"
  echo "tsan: tests started and not ended:"
  python3 - "$tsan_logs/run.txt" <<'PY'
import re, sys
started, ended = [], set()
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    m = re.match(r"◇ (Test|Suite) (.+?) started", line)
    if m and not m.group(2).startswith("case ") and m.group(2) != "run":
        started.append(m.group(2))
    m = re.match(r"[✔✘] (Test|Suite) (\S+)", line)
    if m:
        ended.add(m.group(2))
for name in started:
    if name.split(" ")[0] not in ended:
        print("  " + name)
PY
  if ! grep -qE '✔ Test run with [0-9]+ tests? .*passed' "$tsan_logs/run.txt"; then
    echo "tsan: the run did not finish within 10 minutes"
    exit 1
  fi
  echo "tsan: every test passed, but the test process did not exit within 10 minutes and was killed (a hang at exit)"
elif [ "$tsan_status" != 0 ]; then
  echo "tsan: the run failed (status $tsan_status)"
  exit 1
fi
if compgen -G "$tsan_logs/tsan.*" >/dev/null; then
  cat "$tsan_logs"/tsan.*
  echo "tsan: ThreadSanitizer reported races (above)"
  exit 1
fi
echo "tsan: no race reported"
