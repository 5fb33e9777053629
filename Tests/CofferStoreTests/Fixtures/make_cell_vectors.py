#!/usr/bin/env python3
"""Known-answer vectors for Coffer's store cells (docs/STORE.md, "Sealed cells"): the cell payload v2 with its
padding, sealed as an envelope v1 under the column's MainKey subkey with the cell's context, computed from the
documents with Python's `cryptography` -- independent of the Swift code. One v1 (unpadded) cell shows that the old
version stays readable. Run it to regenerate cell_vectors.json; CellVectorTests checks the Swift side byte for byte."""
import hashlib, hmac, json, struct, pathlib
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes

def hkdf(ikm, salt, info, n):
    return HKDF(algorithm=hashes.SHA256(), length=n, salt=salt, info=info).derive(ikm)

def column_key(main_key, table, column):
    # MainKey.subkey: HKDF-SHA256(MainKey, salt "coffer.mainkey.v1", info "coffer.mainkey.subkey.v1." + label)
    return hkdf(main_key, b"coffer.mainkey.v1", f"coffer.mainkey.subkey.v1.store.{table}.{column}".encode(), 32)

def envelope(root, parts, nonce, pt):
    # Envelope v1 (docs/FORMAT.md), AES-256-GCM.
    d = lambda label, n: hkdf(root, b"coffer.envelope-key.v1", label, n)
    ctx = b"".join(struct.pack(">I", len(p.encode())) + p.encode() for p in parts)
    tag = hmac.new(d(b"context-tag", 32), ctx, hashlib.sha256).digest()[:8]
    header = b"CFEV" + bytes([1, 1]) + d(b"key-id", 8) + tag + nonce
    return header + AESGCM(d(b"aead", 32)).encrypt(nonce, pt, header + ctx)

def string(value):
    if value is None:
        return b"\x00"
    data = value.encode()
    return b"\x01" + struct.pack(">I", len(data)) + data

def bucket(n):
    if n <= 32:
        return 32
    if n > 1 << 20:
        return -(-n // (1 << 20)) * (1 << 20)
    size = 32
    while size < n:
        size <<= 1
    return size

def pad(fields):
    body = b"\x02" + fields
    return body + b"\x80" + bytes(bucket(len(body) + 1) - len(body) - 1)

main_key = bytes(range(32))
cases = [
    ("messages", "subject", ["7"], "text", {"text": "Hello, Coffer"}, pad(string("Hello, Coffer"))),
    ("messages", "subject", ["8"], "text", {"text": None}, pad(string(None))),
    ("messages", "textBody", ["9"], "text", {"text": "x" * 100}, pad(string("x" * 100))),
    ("messages", "fromList", ["7"], "addresses", {"addresses": [["Ann", "ann@example.org", None]]},
     pad(struct.pack(">I", 1) + string("Ann") + string("ann@example.org") + string(None))),
    ("attachments", "body", ["3", "7"], "bytes", {"bytes": bytes(range(40)).hex()},
     pad(struct.pack(">I", 40) + bytes(range(40)))),
    ("settings", "value", ["0", "remoteImages"], "flag", {"flag": True}, pad(b"\x01")),
    # v1: no padding, version byte 0x01 (cells written before v2).
    ("messages", "subject", ["10"], "text", {"text": "Written by v1"}, b"\x01" + string("Written by v1")),
]
vectors = []
for i, (table, column, row, kind, value, plaintext) in enumerate(cases):
    nonce = bytes([0xC0, i]) + bytes(10)
    parts = ["store", table, column] + row
    vectors.append({"table": table, "column": column, "row": row, "kind": kind, "value": value,
                    "mainKey": main_key.hex(), "nonce": nonce.hex(), "plaintext": plaintext.hex(),
                    "envelope": envelope(column_key(main_key, table, column), parts, nonce, plaintext).hex()})
out = pathlib.Path(__file__).with_name("cell_vectors.json")
out.write_text(json.dumps({"cells": vectors}, indent=1) + "\n")
print(f"wrote {out}")
