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
  --skip "StreamedSubmissionTests|LargeFolderTests" "$@"
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
# The run takes about three minutes. Once (session 18) its process did not exit after every test had passed, with
# every thread idle (undiagnosed; CONTRIBUTING, "ThreadSanitizer"): the run is bounded, and a run killed after its
# passing summary line is reported as such, not as a failure; without that line it fails.
tsan_logs="$(mktemp -d)"
set +e
COFFER_BIN="$PWD/.build-tsan/debug/coffer" TSAN_OPTIONS="log_path=$tsan_logs/tsan halt_on_error=0" \
  timeout --kill-after=30 1200 swift test --skip-build --sanitize=thread --scratch-path .build-tsan \
  --filter 'CofferKeychainTests|CofferKeymakerTests|CofferAppTests|AgentTests' >"$tsan_logs/run.txt" 2>&1
tsan_status=$?
set -e
cat "$tsan_logs/run.txt"
if [ "$tsan_status" = 124 ] || [ "$tsan_status" = 137 ]; then
  pkill -KILL -f "$PWD/.build-tsan/debug/" || true
  if ! grep -qE '✔ Test run with [0-9]+ tests? .*passed' "$tsan_logs/run.txt"; then
    echo "tsan: the run did not finish within 20 minutes"
    exit 1
  fi
  echo "tsan: every test passed, but the test process did not exit within 20 minutes and was killed (a hang at exit)"
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
