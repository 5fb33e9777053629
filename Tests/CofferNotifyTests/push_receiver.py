#!/usr/bin/env python3
"""A loopback RFC 8030 push service for WebPushRetryTests, in Python so that nothing of CofferPush checks itself.

Usage: push_receiver.py CONFIG.json (the repository's .venv python; scripts/setup.sh installs http_ece and
cryptography). CONFIG: {"oracle": folder of Tests/CofferPushTests/oracle.py, "devices": {"/path": {"ua_private",
"auth", "answers": [status, ...], "retry_after"?: seconds (default 1)}}}. Listens on 127.0.0.1 (a free port), prints "listening PORT", then for every
POST prints one JSON line {"path", "time", "status", "subject" or "error"}: the body decrypted with http_ece (aes128gcm) and
the VAPID header verified with cryptography (oracle.verify_vapid). It answers each path's statuses in turn (the last
one repeats; 503 and 429 carry the device's "Retry-After"), but a push that does not decrypt or verify gets 400.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

with open(sys.argv[1]) as f:
    CONFIG = json.load(f)
sys.path.insert(0, CONFIG["oracle"])

import http_ece  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from oracle import b64d, verify_vapid  # noqa: E402

SEEN = {}
LOCK = threading.Lock()  # one request at a time: counts and output lines stay whole


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        with LOCK:
            self.handle_push()

    def handle_push(self):
        device = CONFIG["devices"].get(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        record = {"path": self.path, "time": time.time()}
        status = 404
        if device is not None:
            count = SEEN.get(self.path, 0)
            SEEN[self.path] = count + 1
            answers = device["answers"]
            status = answers[min(count, len(answers) - 1)]
            try:
                port = self.server.server_address[1]
                verify_vapid(self.headers["Authorization"], "http://127.0.0.1:%d" % port, int(time.time()))
                assert self.headers["Content-Encoding"] == "aes128gcm", "not aes128gcm"
                assert int(self.headers["TTL"]) > 0, "no TTL"
                assert self.headers["Urgency"] in ("very-low", "low", "normal", "high"), "no Urgency"
                key = ec.derive_private_key(int.from_bytes(b64d(device["ua_private"]), "big"), ec.SECP256R1())
                text = http_ece.decrypt(body, private_key=key, auth_secret=b64d(device["auth"]), version="aes128gcm")
                record["subject"] = json.loads(text)["subject"]
            except Exception as error:  # the test reads the reason
                record["error"] = "%s: %s" % (type(error).__name__, error)
                status = 400
        record["status"] = status
        print(json.dumps(record), flush=True)
        self.send_response(status)
        if status in (429, 503):
            self.send_header("Retry-After", str(device.get("retry_after", 1) if device else 1))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("listening %d" % server.server_address[1], flush=True)
server.serve_forever()
