#!/usr/bin/env python3
"""Known-answer vectors for the agent protocol v7 frames and messages, written from docs/FORMAT.md ("Agent protocol
v7", "Summary page v1") with Python's standard library only -- an implementation independent of the Swift one. Run it to regenerate
frame_vectors.json; FrameVectorTests checks that AgentFrame encodes exactly these bytes, that FrameDecoder reads them
back (whatever the chunking) and refuses the bad ones with the documented reason, and that the JSON payloads decode
to the documented requests, events, answers and replies; SummaryPageTests checks the summary pages."""
import json, pathlib, struct

VERSION = 7
KINDS = {"request": 1, "reply": 2, "event": 3, "answer": 4, "secret": 5, "summaries": 6}
REQUEST_LIMIT = 64 * 1024          # anything a client sends
REPLY_LIMIT = 48 * 1024 * 1024     # what the agent sends

def frame(kind, payload):
    """Header: magic "CF", version 7, kind, payload length as big-endian UInt32; then the payload."""
    return b"CF" + bytes([VERSION, KINDS[kind]]) + struct.pack(">I", len(payload)) + payload

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

add("hello request", "request", js({"hello": {"version": 7}}))
add("pin unlock request", "request", js({"unlock": {"account": "alice@example.com", "method": "pin"}}))
add("the PIN after it", "secret", b"246810")
add("an empty secret", "secret", b"")
add("presence event", "event", js({"presence": {"reason": "Unlock Coffer account alice.", "seconds": 120}}))
add("presence answer", "answer", js({"confirmed": True}))
add("success reply", "reply", js({"unlocked": {"alreadyUnlocked": False}}))
add("failure reply", "reply", js({"failure": {"_0": {"code": "locked", "message": "Coffer is locked."}}}))
add("non-ASCII account", "request", js({"list": {"account": "jürgen@example.de", "limit": 5, "offset": 10}}))
add("attachment chunk", "event", js({"chunk": {"_0": "AAECAw=="}}))
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
    {"name": "version 3", "bytes": (b"CF" + bytes([3])).hex(), "maximum": REQUEST_LIMIT,
     "error": "unsupportedVersion", "value": 3},
    {"name": "version 5", "bytes": (b"CF" + bytes([5])).hex(), "maximum": REQUEST_LIMIT,
     "error": "unsupportedVersion", "value": 5},
    {"name": "version 6", "bytes": (b"CF" + bytes([6])).hex(), "maximum": REQUEST_LIMIT,
     "error": "unsupportedVersion", "value": 6},
    {"name": "version 0", "bytes": (b"CF" + bytes([0, 1]) + struct.pack(">I", 0)).hex(), "maximum": REQUEST_LIMIT,
     "error": "unsupportedVersion", "value": 0},
    {"name": "kind 0", "bytes": (b"CF" + bytes([VERSION, 0]) + struct.pack(">I", 0)).hex(), "maximum": REQUEST_LIMIT,
     "error": "unknownKind", "value": 0},
    {"name": "kind 7", "bytes": (b"CF" + bytes([VERSION, 7]) + struct.pack(">I", 0)).hex(), "maximum": REQUEST_LIMIT,
     "error": "unknownKind", "value": 7},
    {"name": "one byte over the request limit", "maximum": REQUEST_LIMIT, "error": "tooLarge",
     "bytes": (b"CF" + bytes([VERSION, 1]) + struct.pack(">I", REQUEST_LIMIT + 1)).hex(), "value": REQUEST_LIMIT + 1},
    {"name": "one byte over the reply limit", "maximum": REPLY_LIMIT, "error": "tooLarge",
     "bytes": (b"CF" + bytes([VERSION, 2]) + struct.pack(">I", REPLY_LIMIT + 1)).hex(), "value": REPLY_LIMIT + 1},
    {"name": "the largest length", "maximum": REPLY_LIMIT, "error": "tooLarge",
     "bytes": (b"CF" + bytes([VERSION, 2]) + b"\xff\xff\xff\xff").hex(), "value": 0xFFFFFFFF},
]

# Bytes that are the start of a valid frame: no frame yet, and no error.
hello = frame("request", js({"hello": {"version": 7}}))
incomplete = [hello[:n].hex() for n in (1, 2, 3, 7, 8, len(hello) - 1)]

# JSON payloads as a client or the agent writes them, with the fields they carry.
requests = [
    {"json": js({"status": {}}).decode(), "op": "status"},
    {"json": js({"account": {"_0": "alice"}}).decode(), "op": "account", "account": "alice"},
    {"json": js({"unlock": {"account": "alice", "method": "secure-element"}}).decode(), "op": "unlock",
     "account": "alice"},
    {"json": js({"protect": {"account": "alice", "change": {"addPIN": {"tpm": False}}, "proof": "pin"}}).decode(),
     "op": "protect", "account": "alice", "secret": True},
    {"json": js({"protect": {"account": "alice", "change": {"removeAll": {}}, "proof": "secure-element"}}).decode(),
     "op": "protect", "account": "alice"},
    {"json": js({"attachmentContent": {"account": "bob", "id": 42}}).decode(), "op": "attachment-content",
     "account": "bob"},
    {"json": js({"preview": {"account": "bob", "source": {"message": {"id": 7, "allowRemote": False}}}}).decode(),
     "op": "preview", "account": "bob"},
    {"json": js({"previewEnd": {}}).decode(), "op": "preview-end"},
    {"json": js({"import": {"account": "bob", "path": "/tmp/in.mbox", "label": "Inbox", "batch": 500}}).decode(),
     "op": "import", "account": "bob"},
    {"json": js({"search": {"account": "bob", "words": "quarterly numbers", "limit": 3, "offset": 0}}).decode(),
     "op": "search", "account": "bob"},
    {"json": js({"list": {"limit": 50, "offset": 0}}).decode(), "op": "list"},
    {"json": js({"message": {"id": 42}}).decode(), "op": "message"},
    {"json": js({"autolock": {"account": "carol", "policy": "5m"}}).decode(), "op": "autolock", "account": "carol"},
    {"json": js({"serverAdd": {"account": "carol", "server": {"host": "mail.example.org", "port": 993,
     "startTLS": False, "username": "carol", "pins": []}}}).decode(), "op": "server-add", "account": "carol",
     "secret": True},
    {"json": js({"notifyRegister": {"account": "carol", "service": {"host": "notify.example.org", "port": 443,
     "tls": True, "pins": ["a", "b"]}, "deviceName": "laptop"}}).decode(), "op": "notify-register",
     "account": "carol"},
    {"json": js({"notifyUnregister": {"account": "carol"}}).decode(), "op": "notify-unregister", "account": "carol"},
    {"json": js({"fastSyncOn": {"account": "carol", "seconds": 28800, "proof": "pin"}}).decode(), "op": "fastsync-on",
     "account": "carol", "secret": True},
    {"json": js({"fastSyncOff": {"account": "carol"}}).decode(), "op": "fastsync-off", "account": "carol"},
    {"json": js({"push": {"account": "carol", "body": "AAEC", "sync": True}}).decode(), "op": "push",
     "account": "carol"},
    {"json": js({"compose": {"account": "dave", "start": {"reply": {"message": 12, "all": True}}}}).decode(),
     "op": "compose", "account": "dave"},
    {"json": js({"compose": {"account": "dave", "start": {"forward": {"message": 12, "attachOriginal": True}}}}).decode(),
     "op": "compose", "account": "dave"},
    {"json": js({"saveDraft": {"account": "dave", "fields": {"to": [{"name": "Eve", "address": "eve@example.org"}],
     "cc": [], "bcc": [], "subject": "Hello", "text": "Hi Eve.\n", "inReplyTo": [], "references": []},
     "attach": ["/tmp/report.pdf"]}}).decode(), "op": "save-draft", "account": "dave"},
    {"json": js({"sendDraft": {"account": "dave", "draft": 3, "delay": 30}}).decode(), "op": "send-draft",
     "account": "dave"},
    {"json": js({"sendDraft": {"account": "dave", "draft": 3, "delay": 0, "attach": ["/tmp/report.pdf"]}}).decode(),
     "op": "send-draft", "account": "dave"},
    {"json": js({"outboxCancel": {"account": "dave", "id": 4}}).decode(), "op": "outbox-cancel", "account": "dave"},
    {"json": js({"contacts": {"account": "dave", "query": "ev"}}).decode(), "op": "contacts", "account": "dave"},
    {"json": js({"keys": {"account": "dave"}}).decode(), "op": "keys", "account": "dave"},
    {"json": js({"keyGenerate": {"account": "dave", "userID": "Dave <dave@example.org>"}}).decode(),
     "op": "key-generate", "account": "dave"},
    {"json": js({"keyGenerate": {"account": "dave"}}).decode(), "op": "key-generate", "account": "dave"},
    {"json": js({"keyImport": {"account": "dave", "path": "/tmp/dave.asc", "passphrase": False}}).decode(),
     "op": "key-import", "account": "dave"},
    {"json": js({"keyImport": {"account": "dave", "path": "/tmp/dave.asc", "passphrase": True}}).decode(),
     "op": "key-import", "account": "dave", "secret": True},
    {"json": js({"keyExport": {"account": "dave", "fingerprint": "178CA1FF1F048BEC0159D47A07CCBF3022A59470"}}).decode(),
     "op": "key-export", "account": "dave"},
]
failures = [{"json": js({"failure": {"_0": {"code": code, "message": "A sentence."}}}).decode(), "code": code}
            for code in ["locked", "bad-frame", "bad-request", "timeout", "busy", "forbidden", "unsupported-version",
                         "passphrase-required", "failed"]]

# Summary page v1: the payload of a summaries frame (kind 6).
REFERENCE_DATE = 978307200  # 2001-01-01T00:00:00Z in Unix seconds

def string(text):
    data = text.encode("utf-8")
    return struct.pack(">I", len(data)) + data

def optional(text):
    return b"\x00" if text is None else b"\x01" + string(text)

def page(summaries):
    out = struct.pack(">I", len(summaries))
    for s in summaries:
        out += struct.pack(">qqdqq", s["id"], s["conversationID"], s["unix"] - REFERENCE_DATE, s["flags"], s["size"])
        out += optional(s["subject"]) + struct.pack(">I", len(s["from"]))
        for a in s["from"]:
            out += optional(a["name"]) + string(a["address"]) + optional(a["group"])
    return out

sample = [
    {"id": 7, "conversationID": 3, "unix": 1700000000, "flags": 5, "size": 2048, "subject": "Quarterly numbers",
     "from": [{"name": "Jürgen Müller", "address": "jm@example.de", "group": None}]},
    {"id": -1, "conversationID": 9223372036854775807, "unix": 1700000000.25, "flags": 0, "size": 0,
     "subject": None, "from": []},
    {"id": 12, "conversationID": 12, "unix": 0, "flags": 1, "size": 1,
     "subject": "", "from": [{"name": None, "address": "a@b", "group": "team"},
                             {"name": "", "address": "c@d", "group": None}]},
]
summary_pages = [
    {"name": "three summaries", "payload": page(sample).hex(), "summaries": sample},
    {"name": "an empty page", "payload": page([]).hex(), "summaries": []},
]
good = page(sample[:1])
bad_summary_pages = [
    {"name": "empty payload", "payload": ""},
    {"name": "cut inside the count", "payload": good[:3].hex()},
    {"name": "cut inside the first summary", "payload": good[:20].hex()},
    {"name": "cut one byte short", "payload": good[:-1].hex()},
    {"name": "a byte after the last summary", "payload": (good + b"\x00").hex()},
    {"name": "a count larger than the summaries", "payload": (struct.pack(">I", 2) + good[4:]).hex()},
    {"name": "the largest count", "payload": (b"\xff\xff\xff\xff" + good[4:]).hex()},
    {"name": "presence byte 2", "payload": (good[:44] + b"\x02" + good[45:]).hex()},
    {"name": "a subject that is not UTF-8",
     "payload": (good[:45] + struct.pack(">I", 2) + b"\xc3\x28" + good[45 + 4 + 17:]).hex()},
    {"name": "a string length past the end", "payload": (good[:45] + b"\xff\xff\xff\xff" + good[49:]).hex()},
    {"name": "a date that is not a number",
     "payload": (good[:20] + struct.pack(">d", float("nan")) + good[28:]).hex()},
]
assert good[44] == 1 and good[45:49] == struct.pack(">I", 17)

vectors = {"frames": frames, "stream": {"names": stream_names, "bytes": stream.hex()}, "refused": refused,
           "incomplete": incomplete, "requests": requests, "failures": failures, "summaryPages": summary_pages, "badSummaryPages": bad_summary_pages}
out = pathlib.Path(__file__).with_name("frame_vectors.json")
out.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
print(f"wrote {out}: {len(frames)} frames, {len(refused)} refusals, {len(requests)} requests")
