#!/usr/bin/env python3
"""Runs a command in a new pseudo-terminal session and plays the person at the keyboard: when the secure element
shows "type NNNN", it types NNNN ("answer"), a wrong code ("refuse") or nothing at all ("ignore"). Prints everything the terminal showed and
exits with the command's status. Standard library only."""
import os, pty, re, select, sys, time

mode, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
seen = b""
answered = False
deadline = time.time() + 60
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.5)
    if ready:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        match = re.search(rb"type (\d{4}) and press Enter", seen)
        if match and not answered and mode != "ignore":
            code = match.group(1) if mode == "answer" else b"0000" if match.group(1) != b"0000" else b"1111"
            os.write(fd, code + b"\n")
            answered = True
    else:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
sys.stdout.write(seen.decode("utf-8", "replace"))
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
