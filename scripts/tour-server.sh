#!/usr/bin/env bash
# The server tour (`scripts/tour.sh --server`): push and FastSync end to end with the real parts, narrated.
#
# On loopback only, in one throwaway folder, it starts a private Dovecot (imapd and lmtpd, its push_notification
# plugin pointed at coffer-notify), coffer-notify on SQLite, and a `coffer agent`; then it shows:
#   delivery -> encrypted push -> background sync while locked, without a PIN (FastSync)
#   -> `coffer unlock` and `coffer list` show the message -> the admin revokes the session
#   -> the agent logs the account out (remote logout) and `coffer status` says why.
# Everything it started is stopped, and the folder deleted, when it ends (also on Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${COFFER_TOUR_BIN:-}
if [ -z "$BIN" ]; then
  swift build -c release --static-swift-stdlib --product coffer-core >/dev/null
  swift build -c release --static-swift-stdlib --product coffer >/dev/null
  swift build -c release --static-swift-stdlib --product coffer-notify >/dev/null
  BIN=.build/release
fi
BIN=$(cd "$BIN" && pwd)

ROOT=$(mktemp -d /tmp/coffer-server-tour-XXXXXX)
chmod 755 "$ROOT"   # Dovecot runs as nobody when this runs as root, and must reach its folder.
PIN=246813
NAME=mail.coffer.test
export COFFER_HOME="$ROOT/home" XDG_RUNTIME_DIR="$ROOT/run"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
NOTIFY_PID="" AGENT_PID=""
cleanup() {
  [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null || true
  [ -n "$NOTIFY_PID" ] && kill "$NOTIFY_PID" 2>/dev/null && wait "$NOTIFY_PID" 2>/dev/null || true
  python3 Tests/servers/dovecot.py stop --dir "$ROOT/dovecot" >/dev/null 2>&1 || true
  rm -rf "$ROOT"
}
trap cleanup EXIT

coffer() { "$BIN/coffer" "$@"; }
coffer-notify() { "$BIN/coffer-notify" "$@"; }
say() { printf '\n%s\n' "$*"; }
run() { printf '\n$ %s\n' "$*"; "$@"; }
# Waits up to $2 seconds for the text $1 in the file $3.
wait_for() {
  for _ in $(seq 1 "$(( $2 * 5 ))"); do grep -q "$1" "$3" 2>/dev/null && return 0; sleep 0.2; done
  echo "tour-server: timed out waiting for \"$1\" in $3; the last lines of the logs:" >&2
  for log in "$ROOT/agent.log" "$ROOT/notify.log"; do [ -f "$log" ] && tail -n 15 "$log" >&2; done
  return 1
}
# Starts coffer-notify in the background on a free port and sets NOTIFY_PORT.
start_notify() {
  : >"$ROOT/notify.out"
  "$BIN/coffer-notify" serve --port 0 --data-dir "$ROOT/notify" "$@" >"$ROOT/notify.out" 2>"$ROOT/notify.log" &
  NOTIFY_PID=$!
  wait_for "coffer-notify listening on" 30 "$ROOT/notify.out"
  NOTIFY_PORT=$(sed -n 's/^coffer-notify listening on .*:\([0-9]*\)$/\1/p' "$ROOT/notify.out" | head -1)
}

say "Coffer server tour: a private Dovecot, coffer-notify and a coffer agent on loopback, in $ROOT."
bash Tests/servers/make_certs.sh "$ROOT/certs" "$NAME" >/dev/null

# The service makes its event secret on first start; Dovecot's push URL carries it. Start once to make it, and
# keep that port for the real start, which knows Dovecot's IMAP port.
start_notify
PORT=$NOTIFY_PORT
kill "$NOTIFY_PID" && wait "$NOTIFY_PID" 2>/dev/null || true
SECRET=$(cat "$ROOT/notify/event-secret")
DOVECOT=$(python3 Tests/servers/dovecot.py start --dir "$ROOT/dovecot" --owner $$ --cert "$ROOT/certs/a-chain.pem" \
  --key "$ROOT/certs/a.key" --user-pass alice:alice-tour-password \
  --push-url "http://dovecot:$SECRET@127.0.0.1:$PORT/v1/events/dovecot" | tail -1)
IMAPS=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["imaps_port"])' "$DOVECOT")
say "Dovecot answers IMAPS on 127.0.0.1:$IMAPS with a certificate for $NAME (a test CA); LMTP delivers."

: >"$ROOT/notify.out"
"$BIN/coffer-notify" serve --port "$PORT" --data-dir "$ROOT/notify" --imap "imaps://$NAME:$IMAPS" \
  --ca-file "$ROOT/certs/ca.pem" --imap-connect-address 127.0.0.1 >"$ROOT/notify.out" 2>"$ROOT/notify.log" &
NOTIFY_PID=$!
wait_for "coffer-notify listening on" 30 "$ROOT/notify.out"
say "coffer-notify listens on 127.0.0.1:$PORT; it checks registrations against Dovecot over pinned TLS."

run coffer init --account alice
printf '%s\n' "$PIN" | { printf '\n$ coffer protect pin   # the tour types the PIN %s\n' "$PIN"; "$BIN/coffer" protect pin --pin-stdin; }
printf '%s\n%s\n' "$PIN" alice-tour-password | {
  printf '\n$ coffer account add --imap imaps://%s:%s --user alice --ca-file ca.pem --connect 127.0.0.1\n' "$NAME" "$IMAPS"
  "$BIN/coffer" account add --imap "imaps://$NAME:$IMAPS" --user alice --ca-file "$ROOT/certs/ca.pem" \
    --connect 127.0.0.1 --pin-stdin --password-stdin
}
printf '%s\n' "$PIN" | { printf '\n$ coffer notify register --server http://127.0.0.1:%s\n' "$PORT"; "$BIN/coffer" notify register --server "http://127.0.0.1:$PORT" --pin-stdin; }
printf '%s\n' "$PIN" | { printf '\n$ coffer fastsync on --for 1h\n'; "$BIN/coffer" fastsync on --for 1h --pin-stdin; }

say "\$ coffer agent &   # holds the push stream"
"$BIN/coffer" agent 2>"$ROOT/agent.log" &
AGENT_PID=$!
for _ in $(seq 1 100); do "$BIN/coffer" status 2>/dev/null | grep -q "mode: agent" && break; sleep 0.2; done
say "The stream's token is sealed under the MainKey: the agent opens it at the first unlock and keeps only the token."
printf '%s\n' "$PIN" | { printf '\n$ coffer unlock\n'; "$BIN/coffer" unlock --pin-stdin; }
run coffer lock
run coffer status

SUBJECT="Tour subject $RANDOM$RANDOM"
say "Delivering \"$SUBJECT\" to alice over LMTP; Dovecot tells coffer-notify, which seals a push to the device."
printf 'From: Tour Sender <tour-sender@example.org>\r\nTo: alice@%s\r\nSubject: %s\r\nMessage-ID: <%s@example.org>\r\n\r\nHello from the tour.\r\n' \
  "$NAME" "$SUBJECT" "$RANDOM$RANDOM" >"$ROOT/message.eml"
python3 Tests/servers/dovecot.py deliver --dir "$ROOT/dovecot" --to alice --file "$ROOT/message.eml" >/dev/null
wait_for "FastSync synced while locked" 60 "$ROOT/agent.log"
say "The agent opened the push with the session key, unwrapped the MainKey with the key that came with it, synced,
sealed the message and zeroed both keys: no PIN was asked, and the account stayed locked:"
run coffer status
printf '%s\n' "$PIN" | { printf '\n$ coffer unlock\n'; "$BIN/coffer" unlock --pin-stdin; }
run coffer list --limit 3

if grep -rqa "$SUBJECT" "$ROOT/home" "$ROOT/notify" "$ROOT/agent.log" "$ROOT/notify.log"; then
  echo "tour-server: the subject was found in the clear on disk" >&2
  exit 1
fi
say "The subject is in the clear in no file of Coffer or coffer-notify, nor in their logs (Dovecot's Maildir
aside: it is the mail server)."

SESSION=$("$BIN/coffer-notify" sessions list --data-dir "$ROOT/notify" | awk 'NR == 2 { print $1 }')
run coffer-notify sessions revoke "$SESSION" --data-dir "$ROOT/notify"
say "The admin revoked the session; the service closes the agent's WebSocket within 30 s, the agent's next connection gets 401, and it logs the account out."
wait_for "account logged out" 60 "$ROOT/agent.log"
run coffer status
say "Remote logout: the MainKey, its wraps, the push keys, the FastSync record and the mail are gone."
