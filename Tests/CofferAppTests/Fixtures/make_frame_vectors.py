#!/usr/bin/env python3
"""Known-answer vectors for the agent protocol v1 frames and messages, written from docs/FORMAT.md ("Agent protocol
v1") with Python's standard library only -- an implementation independent of the Swift one. Run it to regenerate
frame_vectors.json; FrameVectorTests checks that AgentFrame encodes exactly these bytes, that FrameDecoder reads them
back (whatever the chunking) and refuses the bad ones with the documented reason, and that the JSON payloads decode
to the documented requests, events, answers and replies."""
import json, pathlib, struct

KINDS = {"request": 1, "reply": 2, "event": 3, "answer": 4, "secret": 5}
REQUEST_LIMIT = 64 * 1024          # anything a client sends
REPLY_LIMIT = 48 * 1024 * 1024     # what the agent sends

def frame(kind, payload):
    """Header: magic "CF", version 1, kind, payload length as big-endian UInt32; then the payload."""
    return b"CF" + bytes([1, KINDS[kind]]) + struct.pack(">I", len(payload)) + payload

def js(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

def pattern(n):
    return bytes(i % 251 for i in range(n))

frames = []
def add(name, kind, payload, as_pattern=False):
    """`header` is the frame's first 8 bytes; the whole frame is header + payload. A long payload is given as
    `patternLength` n (bytes i mod 251 for i < n) to keep this file small."""
    encoded = frame(kind, payload)
    entry = {"name": name, "kind": kind, "header": encoded[:8].hex()}
    if as_pattern:
        assert payload == pattern(len(payload))
        entry["patternLength"] = len(payload)
    else:
        entry["payload"] = payload.hex()
        entry["frame"] = encoded.hex()
    frames.append(entry)

add("hello request", "request", js({"op": "hello"}))
add("pin unlock request", "request", js({"op": "unlock", "account": "alice@example.com", "method": "pin"}))
add("the PIN after it", "secret", b"246810")
add("an empty secret", "secret", b"")
add("presence event", "event", js({"event": "presence", "reason": "Unlock Coffer account alice in the agent."}))
add("presence answer", "answer", js({"confirmed": True}))
add("success reply", "reply", js({"ok": True, "alreadyUnlocked": False}))
add("failure reply", "reply", js({"ok": False, "error": {"code": "locked", "message": "Coffer is locked."}}))
add("non-ASCII account", "request", js({"op": "list", "account": "jürgen@example.de", "limit": 5, "offset": 10}))
add("binary payload of 300 bytes", "answer", pattern(300))
add("request at the 64 KiB limit", "request", pattern(REQUEST_LIMIT), as_pattern=True)

# Several frames back to back, as one connection carries them.
stream_names = ["pin unlock request", "the PIN after it", "presence event", "presence answer", "success reply"]
stream = b"".join(bytes.fromhex(f["frame"]) for f in frames if f["name"] in stream_names)

refused = [
    {"name": "HTTP instead of a frame", "bytes": b"GET / HTTP/1.1\r\n".hex(), "maximum": REQUEST_LIMIT,
     "error": "badMagic"},
    {"name": "wrong second magic byte", "bytes": b"CX".hex(), "maximum": REQUEST_LIMIT, "error": "badMagic"},
    {"name": "version 2", "bytes": (b"CF" + bytes([2])).hex(), "maximum": REQUEST_LIMIT,
     "error": "unsupportedVersion", "value": 2},
    {"name": "version 0", "bytes": (b"CF" + bytes([0, 1]) + struct.pack(">I", 0)).hex(), "maximum": REQUEST_LIMIT,
     "error": "unsupportedVersion", "value": 0},
    {"name": "kind 0", "bytes": (b"CF" + bytes([1, 0]) + struct.pack(">I", 0)).hex(), "maximum": REQUEST_LIMIT,
     "error": "unknownKind", "value": 0},
    {"name": "kind 6", "bytes": (b"CF" + bytes([1, 6]) + struct.pack(">I", 0)).hex(), "maximum": REQUEST_LIMIT,
     "error": "unknownKind", "value": 6},
    {"name": "one byte over the request limit", "maximum": REQUEST_LIMIT, "error": "tooLarge",
     "bytes": (b"CF" + bytes([1, 1]) + struct.pack(">I", REQUEST_LIMIT + 1)).hex(), "value": REQUEST_LIMIT + 1},
    {"name": "one byte over the reply limit", "maximum": REPLY_LIMIT, "error": "tooLarge",
     "bytes": (b"CF" + bytes([1, 2]) + struct.pack(">I", REPLY_LIMIT + 1)).hex(), "value": REPLY_LIMIT + 1},
    {"name": "the largest length", "maximum": REPLY_LIMIT, "error": "tooLarge",
     "bytes": (b"CF" + bytes([1, 2]) + b"\xff\xff\xff\xff").hex(), "value": 0xFFFFFFFF},
]

# Bytes that are the start of a valid frame: no frame yet, and no error.
hello = frame("request", js({"op": "hello"}))
incomplete = [hello[:n].hex() for n in (1, 2, 3, 7, 8, len(hello) - 1)]

# JSON payloads as a client or the agent writes them, with the fields they carry.
requests = [
    {"json": js({"op": "status"}).decode(), "op": "status"},
    {"json": js({"op": "unlock", "account": "alice", "method": "secure-element"}).decode(), "op": "unlock",
     "account": "alice", "method": "secure-element"},
    {"json": js({"op": "protect", "account": "alice", "strategy": "pin", "remove": False}).decode(),
     "op": "protect", "account": "alice", "strategy": "pin", "remove": False},
    {"json": js({"op": "attachment-content", "account": "bob", "id": 42}).decode(), "op": "attachment-content",
     "account": "bob", "id": 42},
    {"json": js({"op": "preview-end"}).decode(), "op": "preview-end"},
    {"json": js({"op": "import", "account": "bob", "path": "/tmp/in.mbox", "label": "Inbox", "batch": 500}).decode(),
     "op": "import", "account": "bob", "path": "/tmp/in.mbox", "label": "Inbox", "batch": 500},
    {"json": js({"op": "search", "words": "quarterly numbers", "limit": 3, "offset": 0}).decode(), "op": "search",
     "words": "quarterly numbers", "limit": 3, "offset": 0},
    {"json": js({"op": "autolock", "policy": "5m"}).decode(), "op": "autolock", "policy": "5m"},
]
failures = [{"json": js({"ok": False, "error": {"code": code, "message": "A sentence."}}).decode(), "code": code}
            for code in ["locked", "bad-frame", "bad-request", "timeout", "busy", "forbidden", "failed"]]

vectors = {"frames": frames, "stream": {"names": stream_names, "bytes": stream.hex()}, "refused": refused,
           "incomplete": incomplete, "requests": requests, "failures": failures}
out = pathlib.Path(__file__).with_name("frame_vectors.json")
out.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
print(f"wrote {out}: {len(frames)} frames, {len(refused)} refusals, {len(requests)} requests")
