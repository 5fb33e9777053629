#!/usr/bin/env python3
"""A private Postfix for tests: the relay hop between the test Dovecot's submission service and its LMTP.

Dovecot's submission service (RFC 6409) does not deliver mail itself: it relays every accepted message to an SMTP
server (submission_relay_host), and Dovecot's LMTP speaks only LMTP (it answers EHLO with 500), so the relay cannot be
Dovecot's LMTP directly. This Postfix is that SMTP server: it listens on 127.0.0.1 only, accepts mail only for the
recipients it is given (anything else is refused at RCPT TO, so a refused recipient is synchronous), and hands every
message to Dovecot's LMTP on 127.0.0.1. It never relays anywhere else (no DNS, no outside transport).

Everything is under one folder: main.cf and master.cf (postfix -c DIR), the queue, the data folder and the log
(maillog). Postfix's master must start as root (it then runs its daemons as the `postfix` user, as in any Debian
install); the Debian package provides the binaries, the `postfix` user and the `postdrop` group (scripts/setup.sh
installs it with "No configuration", so no system instance runs).

  postfix.py start --dir DIR --lmtp-port N --recipient ADDR... [--reject-subject TEXT]
      writes the configuration, starts Postfix, waits until its SMTP port answers, prints one JSON line
      {"smtp_port": P, "dir": DIR} (also saved as DIR/postfix.json). A message whose Subject contains TEXT is
      refused at the end of DATA (550 5.7.1), for tests of a permanent failure on DATA.
  postfix.py stop --dir DIR          stops it (SIGKILL to the master's process group) and waits.
"""
import argparse
import json
import os
import pwd
import re
import signal
import socket
import subprocess
import sys
import time

POSTFIX = "/usr/sbin/postfix"
REJECT_TEXT = "the test relay refuses this message on DATA"


def fail(message):
    print(f"postfix.py: {message}", file=sys.stderr)
    sys.exit(2)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(d, smtp_port, lmtp_port, recipients, reject_subject):
    for sub in ("spool", "data"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    os.chmod(os.path.join(d, "data"), 0o700)
    # As in /var/lib/postfix: the data folder (master.lock, caches) belongs to the mail owner.
    owner = pwd.getpwnam("postfix")
    os.chown(os.path.join(d, "data"), owner.pw_uid, owner.pw_gid)
    domains = sorted({r.split("@", 1)[1] for r in recipients})
    listed = ", ".join(f"{r}=ok" for r in recipients)
    main = f"""# Written by Tests/servers/postfix.py: a private test relay, loopback only, no system paths.
compatibility_level = 3.6
queue_directory = {d}/spool
data_directory = {d}/data
meta_directory = /etc/postfix
daemon_directory = /usr/lib/postfix/sbin
command_directory = /usr/sbin
shlib_directory = /usr/lib/postfix
mail_owner = postfix
setgid_group = postdrop
maillog_file_prefixes = {d}
maillog_file = {d}/maillog
myhostname = relay.coffer.test
mydomain = coffer.test
myorigin = coffer.test
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_peername_lookup = no
smtp_dns_support_level = disabled
biff = no
# Mail for the test domains only, to the listed recipients only; nothing is ever relayed elsewhere.
relay_domains = {" ".join(domains)}
relay_recipient_maps = inline:{{ {listed} }}
smtpd_relay_restrictions = reject_unauth_destination
smtpd_recipient_restrictions = reject_unlisted_recipient
relay_transport = lmtp:inet:127.0.0.1:{lmtp_port}
default_transport = error:the test relay delivers to the test domains only
# Dovecot LMTP addresses the user by the local part (the test Dovecot's users are plain names).
lmtp_lhlo_name = relay.coffer.test
message_size_limit = 104857600
mailbox_size_limit = 0
header_checks = regexp:{d}/header_checks
"""
    with open(os.path.join(d, "main.cf"), "w", encoding="utf-8") as f:
        f.write(main)
    with open(os.path.join(d, "header_checks"), "w", encoding="utf-8") as f:
        if reject_subject:
            f.write(f"/^Subject:.*{re.escape(reject_subject)}/ REJECT {REJECT_TEXT}\n")
    master = f"""# Written by Tests/servers/postfix.py: no chroot, SMTP on 127.0.0.1:{smtp_port} only.
127.0.0.1:{smtp_port} inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""
    with open(os.path.join(d, "master.cf"), "w", encoding="utf-8") as f:
        f.write(master)


def wait_port(port, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(4).startswith(b"220"):
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def log_tail(d):
    try:
        with open(os.path.join(d, "maillog"), encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-15:])
    except OSError:
        return "(no log)"


def run_postfix(d, *command):
    return subprocess.run(
        [POSTFIX, "-c", d, *command], capture_output=True, text=True,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        # A caller (the Swift test runner) may block signals; Postfix's master must see SIGTERM to stop.
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, []),
    )


def start(d, lmtp_port, recipients, reject_subject=None, smtp_port=None):
    """Starts Postfix in d; with smtp_port None, on a free port (tried three times)."""
    d = os.path.abspath(d)
    if not os.path.exists(POSTFIX):
        fail("postfix is not installed (scripts/setup.sh installs it)")
    if os.geteuid() != 0:
        fail("Postfix's master must start as root (it runs its daemons as the postfix user)")
    os.makedirs(d, exist_ok=True)
    for attempt in range(3):
        port = smtp_port or free_port()
        write_config(d, port, lmtp_port, recipients, reject_subject)
        started = run_postfix(d, "start")
        if started.returncode == 0 and wait_port(port):
            break
        run_postfix(d, "stop")
        report = f"{started.stdout}{started.stderr}\n{log_tail(d)}"
        if "Address already in use" in report and attempt < 2 and smtp_port is None:
            continue
        fail(f"postfix did not start (exit {started.returncode}):\n{report}")
    info = {"smtp_port": port, "dir": d}
    with open(os.path.join(d, "postfix.json"), "w", encoding="utf-8") as f:
        json.dump(info, f)
    return info


def master_pid(d):
    try:
        with open(os.path.join(d, "spool", "pid", "master.pid"), encoding="utf-8") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def gone(pid):
    """True once the process has exited (a zombie left for an init that does not reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def kill_group(pid, name):
    """Stops a test server at once: SIGKILL to the process group that master pid leads, then waits up to 10 seconds
    for the master to be gone. A test server's mail and queue are thrown away, so nothing is owed a clean stop (which
    took Dovecot 1.1 s and Postfix over 2 s, in every test). A pid whose program is not `name` (the master ended and
    its pid was used again) is left alone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            if f.read().strip() != name:
                return
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (OSError, ProcessLookupError):
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass
        if gone(pid):
            return
        time.sleep(0.01)


def stop(d):
    """Stops the relay (``kill_group``); nothing to do without its pid file."""
    pid = master_pid(os.path.abspath(d))
    if pid is not None:
        kill_group(pid, "master")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["start", "stop"])
    p.add_argument("--dir", required=True)
    p.add_argument("--lmtp-port", type=int)
    p.add_argument("--recipient", action="append")
    p.add_argument("--reject-subject")
    a = p.parse_args()
    if a.command == "start":
        if not a.lmtp_port or not a.recipient:
            fail("start needs --lmtp-port and --recipient")
        print(json.dumps(start(a.dir, a.lmtp_port, a.recipient, a.reject_subject)), flush=True)
    else:
        stop(a.dir)


if __name__ == "__main__":
    main()
