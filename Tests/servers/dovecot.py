#!/usr/bin/env python3
"""A private Dovecot for tests: loopback only, its own config, users, Maildir and logs under one folder.

Installs nothing (scripts/setup.sh installs dovecot-imapd and dovecot-lmtpd). When run as root, Dovecot runs as an
unprivileged user (nobody, or --user) and every Dovecot process keeps that user: no chroot, no privilege change.

  dovecot.py start   --dir DIR --cert CHAIN.pem --key KEY.pem [--user-pass NAME:PASSWORD]... [--run-as USER]
      writes DIR/dovecot.conf and DIR/users, starts `dovecot -F -c DIR/dovecot.conf` in the background, waits until
      its ports answer, and prints one JSON line: {"imaps_port": N, "imap_port": S, "lmtp_port": M, "pid": P,
      "dir": DIR} (imap_port: plain IMAP where only STARTTLS leads on, since ssl = required).
      (also saved as DIR/server.json). Exit 0 on success; on failure exit 2 and print why (with the log's tail).
      With --submission [--submission-max-size N] [--reject-subject TEXT]: also Dovecot's submission service
      (AUTH against the same users; "submission_port": STARTTLS, "submissions_port": implicit TLS) relaying through a
      private Postfix ("relay_port", Tests/servers/postfix.py, needs root) that delivers back into this Dovecot over
      LMTP, so a message sent to NAME@coffer.test lands in NAME's INBOX; other recipients are refused at RCPT TO.
      With --owner PID: a watcher (`dovecot.py watch`, in its own session) stops the server, and its relay, once
      process PID has ended, so that a test run or bench that is killed leaves no server behind; it ends by itself
      when the server is stopped otherwise.
  dovecot.py stop    --dir DIR                          stops it (SIGKILL to its process group) and waits.
  dovecot.py deliver --dir DIR --to NAME [--file MESSAGE]  delivers a message (stdin or file) over LMTP.
  dovecot.py fetch   --dir DIR --user-pass NAME:PASSWORD --ca CA.pem [--name HOST]
      logs in over IMAPS (certificate checked against CA.pem and HOST) and prints INBOX's messages as JSON.
  dovecot.py selftest --dir DIR --cert ... --key ... --ca CA.pem   start, deliver, fetch over IMAPS, compare, stop.
"""
import argparse
import imaplib
import json
import os
import pwd
import select
import shutil
import signal
import smtplib
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import postfix  # noqa: E402  (the relay hop of the submission service)

TEST_NAME = "mail.coffer.test"


def fail(message):
    print(f"dovecot.py: {message}", file=sys.stderr)
    sys.exit(2)


def free_ports(count):
    """Ports free on loopback now, all different: every socket stays bound until all are picked."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def log_tail(d):
    try:
        with open(os.path.join(d, "dovecot.log"), encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-15:])
    except OSError:
        return "(no log)"


def write_config(d, cert, key, users, account, imaps_port, imap_port, lmtp_port, push_url=None, submission=None):
    uid, gid = account.pw_uid, account.pw_gid
    group = subprocess.run(["id", "-gn", account.pw_name], capture_output=True, text=True).stdout.strip()
    for sub in ("run", "state", "mail", "home"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    shutil.copy(cert, os.path.join(d, "server-chain.pem"))
    shutil.copy(key, os.path.join(d, "server.key"))
    os.chmod(os.path.join(d, "server.key"), 0o600)
    with open(os.path.join(d, "users"), "w", encoding="utf-8") as f:
        for name, password in users:
            f.write(f"{name}:{{PLAIN}}{password}:{uid}:{gid}::{d}/home/{name}::\n")
    conf = f"""# Written by Tests/servers/dovecot.py: a private test server, loopback only, no system paths.
base_dir = {d}/run
state_dir = {d}/state
log_path = {d}/dovecot.log
info_log_path = {d}/dovecot.log
debug_log_path = {d}/dovecot.log
instance_name = coffer-test-{imaps_port}
listen = 127.0.0.1
# The test clients may pass on their own client address (IMAP ID x-originating-ip), as a trusted proxy does.
login_trusted_networks = 127.0.0.0/8
protocols = imap lmtp{" submission" if submission else ""}
ssl = required
ssl_cert = <{d}/server-chain.pem
ssl_key = <{d}/server.key
ssl_min_protocol = TLSv1.2
disable_plaintext_auth = yes
auth_mechanisms = plain login
default_internal_user = {account.pw_name}
default_internal_group = {group}
default_login_user = {account.pw_name}
first_valid_uid = {uid}
last_valid_uid = {uid}
first_valid_gid = {gid}
last_valid_gid = {gid}
mail_location = maildir:{d}/mail/%u
# IMAP METADATA (RFC 5464), which the push registration sets; attributes in a file dict per user.
mail_attribute_dict = file:{d}/state/attributes-%u
protocol imap {{
  imap_metadata = yes
}}
postmaster_address = postmaster@coffer.test
hostname = {TEST_NAME}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {d}/users
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {d}/users
}}
service imap-login {{
  chroot =
  user = {account.pw_name}
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
service pop3-login {{
  chroot =
}}
service submission-login {{
  chroot =
{submission_listeners(account, submission)}}}
service imap {{
  user = {account.pw_name}
}}
service lmtp {{
  user = {account.pw_name}
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
service auth {{
  user = {account.pw_name}
}}
service auth-worker {{
  user = {account.pw_name}
}}
service anvil {{
  chroot =
  user = {account.pw_name}
}}
service stats {{
  user = {account.pw_name}
}}
service dict {{
  user = {account.pw_name}
}}
service dict-async {{
  user = {account.pw_name}
}}
"""
    if submission:
        conf += submission_config(account, submission)
    if push_url:
        # Optional: the push_notification plugin's ox driver POSTs new-mail events to push_url (coffer-notify's
        # /v1/events/dovecot with the secret as Basic auth) for users whose METADATA entry
        # /private/vendor/vendor.dovecot/http-notify is set; IMAP loads the plugin so clients may set that entry.
        conf += f"""protocol lmtp {{
  mail_plugins = $mail_plugins notify push_notification
}}
protocol imap {{
  mail_plugins = $mail_plugins notify push_notification
}}
plugin {{
  push_notification_driver = ox:url={push_url} user_from_metadata
}}
"""
    with open(os.path.join(d, "dovecot.conf"), "w", encoding="utf-8") as f:
        f.write(conf)
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            os.chown(os.path.join(root, n), uid, gid)
    os.chown(d, uid, gid)


def submission_listeners(account, submission):
    """The submission-login listeners: STARTTLS on one port, implicit TLS (RFC 8314) on the other."""
    if not submission:
        return ""
    return f"""  user = {account.pw_name}
  inet_listener submission {{
    address = 127.0.0.1
    port = {submission["submission_port"]}
  }}
  inet_listener submissions {{
    address = 127.0.0.1
    port = {submission["submissions_port"]}
    ssl = yes
  }}
"""


def submission_config(account, submission):
    """Dovecot's submission service (RFC 6409, AUTH against the same users as IMAP) relaying every message to the
    private Postfix (Tests/servers/postfix.py), which delivers it back into this Dovecot over LMTP."""
    return f"""submission_relay_host = 127.0.0.1
submission_relay_port = {submission["relay_port"]}
submission_relay_trusted = yes
submission_max_mail_size = {submission["max_size"]}
service submission {{
  user = {account.pw_name}
}}
# The relay addresses users as name@coffer.test; the users here are plain names.
protocol lmtp {{
  auth_username_format = %Ln
}}
"""


def wait_port(port, proc, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def start(a):
    d = os.path.abspath(a.dir)
    dovecot = shutil.which("dovecot") or ("/usr/sbin/dovecot" if os.path.exists("/usr/sbin/dovecot") else None)
    if dovecot is None:
        fail("the dovecot command is not installed (scripts/setup.sh installs dovecot-imapd and dovecot-lmtpd)")
    os.makedirs(d, exist_ok=True)
    account = pwd.getpwnam(a.run_as) if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    users = [tuple(u.split(":", 1)) for u in (a.user_pass or ["alice:alice-test-password"])]
    # A port found free may be taken by a server that another test starts meanwhile: retry with new ports then.
    for attempt in range(3):
        imaps_port, imap_port, lmtp_port, submission_port, submissions_port, relay_port = free_ports(6)
        push_url = getattr(a, "push_url", None)
        submission = None
        if getattr(a, "submission", False):
            submission = {"submission_port": submission_port, "submissions_port": submissions_port,
                          "relay_port": relay_port, "max_size": a.submission_max_size}
        write_config(d, a.cert, a.key, users, account, imaps_port, imap_port, lmtp_port, push_url, submission)
        kwargs = {}
        if os.geteuid() == 0:
            kwargs = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        out = open(os.path.join(d, "dovecot.stdout"), "w")
        proc = subprocess.Popen(
            [dovecot, "-F", "-c", os.path.join(d, "dovecot.conf")],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=d, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, **kwargs,
            # A caller (the Swift test runner) may block signals; Dovecot must see its signals (SIGHUP, SIGCHLD).
            preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, []),
        )
        ports = [imaps_port, imap_port, lmtp_port] + ([submission_port, submissions_port] if submission else [])
        ports_answer = all(wait_port(port, proc) for port in ports)
        # A port that answers may be another server's: this one would have exited on its failed bind by now.
        time.sleep(0.2)
        if ports_answer and proc.poll() is None:
            break
        code = proc.poll()
        if code is None:
            proc.kill()
            proc.wait()
        with open(os.path.join(d, "dovecot.stdout"), encoding="utf-8", errors="replace") as f:
            early = f.read()[-2000:]
        report = f"{early}\n{log_tail(d)}"
        if ("Address already in use" in report or "duplicate listener" in report) and attempt < 2:
            continue
        fail(f"dovecot did not start (exit {code}):\n{report}")
    info = {"imaps_port": imaps_port, "imap_port": imap_port, "lmtp_port": lmtp_port, "pid": proc.pid, "dir": d}
    if submission:
        recipients = [f"{name}@coffer.test" for name, _ in users]
        try:
            postfix.start(os.path.join(d, "relay"), lmtp_port, recipients, a.reject_subject, smtp_port=relay_port)
        except SystemExit:
            stop_pid(proc.pid)
            raise
        info.update(submission_port=submission_port, submissions_port=submissions_port, relay_port=relay_port)
    with open(os.path.join(d, "server.json"), "w", encoding="utf-8") as f:
        json.dump(info, f)
    if a.owner:
        # Its own session, and none of this process's output: the caller reads that to its end.
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "watch", "--dir", d, "--owner", str(a.owner)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
    print(json.dumps(info), flush=True)
    return info


def load(d):
    with open(os.path.join(os.path.abspath(d), "server.json"), encoding="utf-8") as f:
        return json.load(f)


def stop(a):
    """Stops the relay Postfix if there is one, then Dovecot."""
    info = load(a.dir)
    if "relay_port" in info:
        postfix.stop(os.path.join(info["dir"], "relay"))
    stop_pid(info["pid"])


def watch(a):
    """Waits for the owner or the server to end; when the owner ends first, stops both servers as `stop` does.

    The server is held by a pidfd: it wakes the watcher when the server is stopped otherwise.
    """
    try:
        server = os.pidfd_open(load(a.dir)["pid"])
    except ProcessLookupError:
        return
    try:
        owner = os.pidfd_open(a.owner)
    except ProcessLookupError:
        stop(a)
        return
    if server not in select.select([owner, server], [], [])[0]:
        stop(a)


def stop_pid(pid):
    """Stops Dovecot at once (postfix.kill_group: SIGKILL to the master's process group)."""
    postfix.kill_group(pid, "dovecot")


def deliver(a, message=None):
    info = load(a.dir)
    if message is None:
        message = open(a.file, "rb").read() if a.file else sys.stdin.buffer.read()
    with smtplib.LMTP("127.0.0.1", info["lmtp_port"]) as lmtp:
        refused = lmtp.sendmail("sender@coffer.test", [a.to], message)
    if refused:
        fail(f"LMTP refused {refused}")


class IMAPS(imaplib.IMAP4_SSL):
    """IMAP4_SSL that connects to 127.0.0.1 but checks the certificate for a given name."""

    def __init__(self, port, name, context):
        self._name = name
        super().__init__("127.0.0.1", port, ssl_context=context)

    def _create_socket(self, timeout):
        sock = imaplib.IMAP4._create_socket(self, timeout)
        return self.ssl_context.wrap_socket(sock, server_hostname=self._name)


def fetch(a):
    info = load(a.dir)
    context = ssl.create_default_context(cafile=a.ca)
    name, password = a.user_pass[0].split(":", 1)
    with IMAPS(info["imaps_port"], a.name, context) as imap:
        imap.login(name, password)
        imap.select("INBOX", readonly=True)
        _, data = imap.uid("SEARCH", None, "ALL")
        messages = []
        for uid in data[0].split():
            _, parts = imap.uid("FETCH", uid, "(BODY.PEEK[])")
            messages.append({"uid": int(uid), "body": parts[0][1].decode("utf-8", "replace")})
        imap.logout()
    return messages


def selftest(a):
    a.user_pass = a.user_pass or ["alice:alice-test-password"]
    start(a)
    try:
        subject = f"harness selftest {time.time_ns()}"
        body = f"From: sender@coffer.test\r\nTo: alice@coffer.test\r\nSubject: {subject}\r\n\r\nHello over LMTP.\r\n"
        a.to = a.user_pass[0].split(":", 1)[0]
        deliver(a, body.encode())
        messages = fetch(a)
        if not any(subject in m["body"] for m in messages):
            fail(f"the delivered message is not in INBOX over IMAPS: {messages}\n{log_tail(os.path.abspath(a.dir))}")
        print(json.dumps({"selftest": "ok", "messages": len(messages)}))
    finally:
        stop(a)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["start", "stop", "deliver", "fetch", "selftest", "watch"])
    p.add_argument("--dir", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--ca")
    p.add_argument("--name", default=TEST_NAME)
    p.add_argument("--user-pass", action="append")
    p.add_argument("--push-url", help="enable push_notification (ox driver) posting to this URL")
    p.add_argument("--submission", action="store_true",
                   help="also run the submission service (STARTTLS and implicit TLS ports) relaying through a private "
                   "Postfix into this Dovecot (Tests/servers/postfix.py; needs root)")
    p.add_argument("--submission-max-size", type=int, default=0, help="submission_max_mail_size in bytes (0: none)")
    p.add_argument("--reject-subject", help="the relay refuses, at the end of DATA, a message whose Subject has this")
    p.add_argument("--run-as", default="nobody")
    p.add_argument("--owner", type=int, help="stop the server once this process has ended (start, watch)")
    p.add_argument("--to")
    p.add_argument("--file")
    a = p.parse_args()
    if a.command in ("start", "selftest") and not (a.cert and a.key):
        fail("start needs --cert and --key")
    if a.command in ("fetch", "selftest") and not a.ca:
        fail(f"{a.command} needs --ca")
    if a.command == "start":
        start(a)
    elif a.command == "stop":
        stop(a)
    elif a.command == "watch":
        if not a.owner:
            fail("watch needs --owner")
        watch(a)
    elif a.command == "deliver":
        if not a.to:
            fail("deliver needs --to")
        deliver(a)
    elif a.command == "fetch":
        if not a.user_pass:
            fail("fetch needs --user-pass")
        print(json.dumps(fetch(a)))
    else:
        selftest(a)


if __name__ == "__main__":
    main()
