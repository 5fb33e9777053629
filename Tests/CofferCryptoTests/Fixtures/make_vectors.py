#!/usr/bin/env python3
"""Known-answer vectors for Coffer's envelope v1, stream v1, PIN KDF, device secret v1 and keychain item v1, computed
from docs/FORMAT.md with
Python's `cryptography` and `hashlib` -- an implementation independent of the Swift one. Run it to regenerate
vectors.json; the Swift tests check that CofferCrypto produces and opens exactly these bytes."""
import hashlib, hmac, json, struct, pathlib
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes

def hkdf(ikm, salt, info, n):
    return HKDF(algorithm=hashes.SHA256(), length=n, salt=salt, info=info).derive(ikm)

def subkeys(root):
    d = lambda label, n: hkdf(root, b"coffer.envelope-key.v1", label, n)
    return {"aead": d(b"aead", 32), "ctx": d(b"context-tag", 32), "id": d(b"key-id", 8), "stream": d(b"stream", 32)}

def context(parts):
    return b"".join(struct.pack(">I", len(p.encode())) + p.encode() for p in parts)

def aead(alg, key):
    return AESGCM(key) if alg == 1 else ChaCha20Poly1305(key)

def envelope(root, parts, alg, nonce, pt):
    k = subkeys(root); ctx = context(parts)
    tag = hmac.new(k["ctx"], ctx, hashlib.sha256).digest()[:8]
    header = b"CFEV" + bytes([1, alg]) + k["id"] + tag + nonce
    return header + aead(alg, k["aead"]).encrypt(nonce, pt, header + ctx)

def stream(root, parts, alg, salt, pt):
    k = subkeys(root); ctx = context(parts)
    header = b"CFST" + bytes([1, alg]) + k["id"] + struct.pack(">I", 65536) + salt
    fk = hkdf(k["stream"], salt, b"coffer.stream.v1" + header + ctx, 32)
    chunks = [pt[i:i + 65536] for i in range(0, len(pt), 65536)] or [b""]
    out = header
    for i, c in enumerate(chunks):
        nonce = b"\0\0\0" + struct.pack(">Q", i) + bytes([1 if i == len(chunks) - 1 else 0])
        out += aead(alg, fk).encrypt(nonce, c, None)
    return out

def pattern(n):
    return bytes(i % 251 for i in range(n))

root = bytes(range(32))
vectors = {"envelope": [], "stream": [], "pinKDF": []}
for alg in (1, 2):
    for i, (parts, pt) in enumerate([([], b""), (["store", "messages", "subject", "42"], b"hello, coffer"),
                                     (["keychain", "item"], pattern(1000))]):
        nonce = bytes([alg, i]) + bytes(10)
        vectors["envelope"].append({"key": root.hex(), "context": parts, "algorithm": alg, "nonce": nonce.hex(),
                                    "plaintextLength": len(pt), "envelope": envelope(root, parts, alg, nonce, pt).hex()})
    for n in (0, 100, 65536, 65536 * 2 + 7):
        salt = bytes([alg]) * 32
        s = stream(root, ["attachments", "7"], alg, salt, pattern(n))
        entry = {"key": root.hex(), "context": ["attachments", "7"], "algorithm": alg, "salt": salt.hex(),
                 "plaintextLength": n, "sha256": hashlib.sha256(s).hexdigest(), "length": len(s)}
        if len(s) < 70000:
            entry["stream"] = s.hex()
        vectors["stream"].append(entry)
for pin, log_n in (("1234", 10), ("correct horse", 12)):
    salt = bytes(range(16)); pepper = bytes([0xAB]) * 32
    stretched = hashlib.scrypt(pin.encode(), salt=salt, n=1 << log_n, r=8, p=1, dklen=32, maxmem=1 << 28)
    kek = hkdf(stretched, pepper, b"coffer.pin-kek.v1", 32)
    vectors["pinKDF"].append({"pin": pin, "salt": salt.hex(), "pepper": pepper.hex(), "logN": log_n, "r": 8, "p": 1,
                              "kek": kek.hex()})

# Device secret v1 and keychain item v1 (FORMAT.md "Device secret v1", "Keychain item v1", "Key derivation").
def lp(b):
    return struct.pack(">I", len(b)) + b

def machine_id(file_bytes):
    return bytes(c for c in file_bytes if c > 0x20)

def device_key(secret, info):
    return hkdf(secret, b"coffer.device.v1", info, 32)

def item_key(secret, mid, accessibility):
    this_device_only = accessibility in (3, 4, 5)
    return device_key(secret, b"item-key.this-device-only" + mid if this_device_only else b"item-key.portable")

devices = [
    (bytes(range(0x40, 0x60)), b"0123456789abcdef0123456789abcdef\n"),
    (bytes([0xC3]) * 32, b" \t\n"),  # no usable machine id: only the device secret binds
]
vectors["deviceSecret"] = []
vectors["keychainItem"] = []
items = [
    ("coffer", "coffer.protection", "alice@example.com", 5, bytes(range(1, 41))),
    ("coffer", "coffer.mainkey.none", "b\u00f6b", 1, b"portable value"),
    ("elsewhere", "coffer.test", "", 3, b""),
]
for d, (secret, mid_file) in enumerate(devices):
    mid = machine_id(mid_file)
    vectors["deviceSecret"].append({
        "secretFile": (b"CFDS" + bytes([1]) + secret).hex(), "machineIDFile": mid_file.hex(), "machineID": mid.hex(),
        "pepperLabel": "pin-kdf", "pepper": device_key(secret, b"pepper.pin-kdf\0" + mid).hex()})
    for i, (group, service, account, acc, value) in enumerate(items):
        address = lp(group.encode()) + lp(service.encode()) + lp(account.encode())
        name = hashlib.sha256(address).hexdigest() + ".item"
        nonce = bytes([0xD0 + d, i]) + bytes(10)
        sealed = envelope(item_key(secret, mid, acc), ["coffer.keychain.item.v1", name, str(acc)], 1, nonce,
                          address + value)
        vectors["keychainItem"].append({
            "device": d, "accessGroup": group, "service": service, "account": account, "accessibility": acc,
            "value": value.hex(), "nonce": nonce.hex(), "fileName": name,
            "file": (b"CFKC" + bytes([1, acc]) + sealed).hex()})

out = pathlib.Path(__file__).with_name("vectors.json")
out.write_text(json.dumps(vectors, indent=1) + "\n")
print(f"wrote {out}")
