#!/usr/bin/env python3
"""Runs a command in a new pseudo-terminal session, waits for its "press Enter" prompt, then interrupts it the way a
person or the system would: "SIGINT" types Ctrl-C, "SIGHUP" hangs the terminal up (closes it), "SIGTERM" sends the
signal to the process, "ENTER" presses Enter. Before and after, it reports whether the file the prompt named exists.
Prints the terminal's output, then "preview: <path>", "before: present|absent", "after: present|absent" and
"exit: <status>". With "--prompt-path FILE" the path is read from the prompt "The file is at PATH;". Standard library
only."""
import os, pty, re, select, signal, sys, time

action, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
seen = b""
path = None
deadline = time.time() + 60
while time.time() < deadline and path is None:
    ready, _, _ = select.select([fd], [], [], 0.5)
    if ready:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        match = re.search(rb"The file is at (\S+); press Enter", seen)
        if match:
            path = match.group(1).decode()
before = "present" if path and os.path.exists(path) else "absent"
if action == "SIGINT":
    os.write(fd, b"\x03")
elif action == "SIGHUP":
    os.close(fd)
    fd = None
elif action == "SIGTERM":
    os.kill(pid, signal.SIGTERM)
elif action == "ENTER":
    os.write(fd, b"\n")
end = time.time() + 30
status = None
while time.time() < end:
    if fd is not None:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
                seen += chunk
            except OSError:
                pass
    done, raw = os.waitpid(pid, os.WNOHANG)
    if done:
        status = os.waitstatus_to_exitcode(raw)
        break
    if fd is None:
        time.sleep(0.1)
if status is None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
after = "present" if path and os.path.exists(path) else "absent"
sys.stdout.write(seen.decode("utf-8", "replace"))
print(f"\npreview: {path}\nbefore: {before}\nafter: {after}\nexit: {status}")
