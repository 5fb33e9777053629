#!/usr/bin/env bash
# Installs what Coffer's build and tests need on a fresh Debian machine. Idempotent; run by tour.sh and test.sh.
set -euo pipefail

need=()
dpkg -s libsqlite3-dev >/dev/null 2>&1 || need+=(libsqlite3-dev)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v setsid >/dev/null 2>&1 || need+=(util-linux)
# gdb: the ThreadSanitizer stage of scripts/test.sh prints every thread's stack of a run that does not end.
command -v gdb >/dev/null 2>&1 || need+=(gdb)
# The private Dovecot of the transport and IMAP tests (Tests/servers/dovecot.py): IMAPS and LMTP on loopback.
dpkg -s dovecot-imapd >/dev/null 2>&1 || need+=(dovecot-imapd)
dpkg -s dovecot-lmtpd >/dev/null 2>&1 || need+=(dovecot-lmtpd)
# The SMTP tests' submission server (dovecot.py --submission): Dovecot's submission service, relaying through a
# private Postfix (Tests/servers/postfix.py, its own config, queue and log in the test's folder, 127.0.0.1 only) back
# into Dovecot's LMTP. Postfix is installed with "No configuration", so no system instance is set up or started.
dpkg -s dovecot-submissiond >/dev/null 2>&1 || need+=(dovecot-submissiond)
dpkg -s postfix >/dev/null 2>&1 || need+=(postfix)
# Dovecot installed here is for the tests' private instances only: its system service must not stay up listening on
# every interface (the packages' postinst starts it where an init system runs).
system_dovecot_ours=0
dpkg -s dovecot-core >/dev/null 2>&1 || system_dovecot_ours=1
# mbsync, the reference beside which `coffer-bench sync` measures `coffer sync`.
dpkg -s isync >/dev/null 2>&1 || need+=(isync)
# notmuch, the plaintext local mail index beside which `coffer-bench notmuch` times list, search and show.
dpkg -s notmuch >/dev/null 2>&1 || need+=(notmuch)
# wrk, the HTTP load generator `coffer-bench notify` runs against coffer-notify's event endpoint.
dpkg -s wrk >/dev/null 2>&1 || need+=(wrk)
# CofferTPM builds against tpm2-tss (ESAPI, the TCTI loader); its tests run a private software TPM (swtpm) on
# loopback, stopped through swtpm_ioctl (swtpm-tools).
dpkg -s libtss2-dev >/dev/null 2>&1 || need+=(libtss2-dev)
dpkg -s swtpm >/dev/null 2>&1 || need+=(swtpm)
dpkg -s swtpm-tools >/dev/null 2>&1 || need+=(swtpm-tools)
# coffer-notify's PostgreSQL storage tests: a private cluster (scripts/postgres.sh: initdb in a temp folder, loopback).
dpkg -s postgresql >/dev/null 2>&1 || need+=(postgresql)
# CofferOpenPGP builds against RNP (the OpenPGP library Thunderbird uses): librnp and its FFI header.
dpkg -s librnp-dev >/dev/null 2>&1 || need+=(librnp-dev)
# Sequoia's CLI, the OpenPGP tests' interop oracle beside gpg: it imports our keys, decrypts and verifies our messages.
command -v sq >/dev/null 2>&1 || need+=(sq)
# GnuPG, the other oracle (slim Debian images lack it): gpg, and gpgconf to stop each test's agent.
command -v gpg >/dev/null 2>&1 && command -v gpgconf >/dev/null 2>&1 || need+=(gnupg)

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  echo "postfix postfix/main_mailer_type select No configuration" | $sudo_cmd debconf-set-selections
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
  if [ "$system_dovecot_ours" -eq 1 ]; then
    for service in dovecot postfix; do
      $sudo_cmd systemctl disable --now "$service" >/dev/null 2>&1 || $sudo_cmd service "$service" stop >/dev/null 2>&1 || true
    done
  fi
fi

# The browser test (Tests/browser/render_vectors.py): Debian's Chromium, driven by Playwright for Python in .venv,
# which uses that Chromium through its executable path (no browser download), nh3 for coffer-bench, and http_ece,
# cryptography and py_vapid for CofferPush's interop oracle (Tests/CofferPushTests/oracle.py).
if ! command -v chromium >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "setup: installing chromium, fonts-liberation and python3-venv"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends chromium fonts-liberation python3-venv \
    >/dev/null
fi
venv="$(cd "$(dirname "$0")/.." && pwd)/.venv"
if ! "$venv/bin/python" -c 'import playwright, nh3, http_ece, cryptography, py_vapid, schemathesis' >/dev/null 2>&1; then
  echo "setup: creating .venv with playwright, nh3, http_ece, cryptography, py_vapid and schemathesis"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check playwright nh3 http_ece cryptography py_vapid schemathesis
fi
