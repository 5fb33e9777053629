#!/usr/bin/env python3
"""Runs a command in a new pseudo-terminal session and plays the person at the keyboard. Standard library only.

`pty_driver.py presence MODE COMMAND...`: when the secure element shows "type NNNN and press Enter", types NNNN
("answer"), a wrong code ("refuse") or nothing at all ("ignore"). Prints everything the terminal showed and exits
with the command's status.

`pty_driver.py preview ACTION COMMAND...`: waits for the prompt "The file is at PATH; press Enter", then interrupts
the way a person or the system would: "SIGINT" types Ctrl-C, "SIGHUP" hangs the terminal up (closes it), "SIGTERM"
sends the signal to the process, "ENTER" presses Enter. Prints the terminal's output, then "preview: <path>",
"before: present|absent", "after: present|absent" (whether the file exists) and "exit: <status>" (minus the signal
that ended the process)."""
import os, pty, re, select, signal, sys, time

PRESENCE = re.compile(rb"type (\d{4}) and press Enter")
PREVIEW = re.compile(rb"The file is at (\S+); press Enter")


class Terminal:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.seen = b""
        self.status = None

    def pump(self, timeout):
        """Reads what the terminal shows for up to `timeout` seconds: "data", "idle" (nothing came) or "closed"."""
        if self.fd is None:
            time.sleep(timeout)
            return "closed"
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return "idle"
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:
            return "closed"
        self.seen += chunk
        return "data" if chunk else "closed"

    def hang_up(self):
        os.close(self.fd)
        self.fd = None

    def exited(self):
        """Whether the command has ended (its status is then in `status`)."""
        if self.status is None:
            done, raw = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(raw)
        return self.status is not None

    def output(self):
        return self.seen.decode("utf-8", "replace")


def presence(terminal, mode):
    answered = False
    deadline = time.time() + 60
    while time.time() < deadline:
        state = terminal.pump(0.5)
        if state == "closed" or (state == "idle" and terminal.exited()):
            break
        match = PRESENCE.search(terminal.seen)
        if match and not answered and mode != "ignore":
            code = match.group(1) if mode == "answer" else b"0000" if match.group(1) != b"0000" else b"1111"
            os.write(terminal.fd, code + b"\n")
            answered = True
    sys.stdout.write(terminal.output())
    if terminal.status is None:
        _, raw = os.waitpid(terminal.pid, 0)
        terminal.status = os.waitstatus_to_exitcode(raw)
    sys.exit(terminal.status)


def preview(terminal, action):
    path = None
    deadline = time.time() + 60
    while time.time() < deadline and path is None:
        if terminal.pump(0.5) == "closed":
            break
        match = PREVIEW.search(terminal.seen)
        if match:
            path = match.group(1).decode()
    before = "present" if path and os.path.exists(path) else "absent"
    if action == "SIGINT":
        os.write(terminal.fd, b"\x03")
    elif action == "SIGHUP":
        terminal.hang_up()
    elif action == "SIGTERM":
        os.kill(terminal.pid, signal.SIGTERM)
    elif action == "ENTER":
        os.write(terminal.fd, b"\n")
    end = time.time() + 30
    while time.time() < end and not terminal.exited():
        terminal.pump(0.2)
    if terminal.status is None:
        os.kill(terminal.pid, signal.SIGKILL)
        os.waitpid(terminal.pid, 0)
    after = "present" if path and os.path.exists(path) else "absent"
    sys.stdout.write(terminal.output())
    print(f"\npreview: {path}\nbefore: {before}\nafter: {after}\nexit: {terminal.status}")


task, choice, command = sys.argv[1], sys.argv[2], sys.argv[3:]
{"presence": presence, "preview": preview}[task](Terminal(command), choice)
