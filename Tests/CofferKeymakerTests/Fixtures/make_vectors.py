#!/usr/bin/env python3
"""Known-answer vectors for the Keymaker's formats (docs/FORMAT.md: "Keymaker records", "Software secure element
key v1", "`Locked<T>`"), computed from that page with Python's `cryptography` and `hashlib` -- an implementation
independent of the Swift one. HPKE (RFC 9180, base mode, DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-256-GCM) is
composed here from its RFC so the ephemeral key can be fixed. Run it to regenerate keymaker_vectors.json; the Swift
tests put these bytes in a keychain and a secure element folder and unlock them with the Keymaker."""
import hashlib, hmac, json, struct, pathlib
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

def hkdf(ikm, salt, info, n):
    return HKDF(algorithm=hashes.SHA256(), length=n, salt=salt, info=info).derive(ikm)

def context(parts):
    return b"".join(struct.pack(">I", len(p)) + p for p in (x.encode() if isinstance(x, str) else x for x in parts))

def envelope(root, parts, nonce, pt):
    """Envelope v1, AES-256-GCM."""
    d = lambda label, n: hkdf(root, b"coffer.envelope-key.v1", label, n)
    ctx = context(parts)
    tag = hmac.new(d(b"context-tag", 32), ctx, hashlib.sha256).digest()[:8]
    header = b"CFEV" + bytes([1, 1]) + d(b"key-id", 8) + tag + nonce
    return header + AESGCM(d(b"aead", 32)).encrypt(nonce, pt, header + ctx)

def pepper(secret, machine_id, label):
    return hkdf(secret, b"coffer.device.v1", b"pepper." + label.encode() + b"\0" + machine_id, 32)

# --- HPKE, RFC 9180 section 4 and 5, mode base, single-shot seal (sequence number 0) ---
def extract(salt, ikm):
    return hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()

def expand(prk, info, n):
    return HKDFExpand(algorithm=hashes.SHA256(), length=n, info=info).derive(prk)

def labeled_extract(suite, salt, label, ikm):
    return extract(salt, b"HPKE-v1" + suite + label + ikm)

def labeled_expand(suite, prk, label, info, n):
    return expand(prk, struct.pack(">H", n) + b"HPKE-v1" + suite + label + info, n)

def point(key):
    return key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)

def hpke_seal(recipient_public, ephemeral, info, aad, pt):
    kem = b"KEM" + struct.pack(">H", 0x0010)
    suite = b"HPKE" + struct.pack(">HHH", 0x0010, 0x0001, 0x0002)
    dh = ephemeral.exchange(ec.ECDH(), recipient_public)
    enc = point(ephemeral)
    recipient = recipient_public.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    prk = labeled_extract(kem, b"", b"eae_prk", dh)
    shared = labeled_expand(kem, prk, b"shared_secret", enc + recipient, 32)
    ks_context = b"\x00" + labeled_extract(suite, b"", b"psk_id_hash", b"") + labeled_extract(suite, b"", b"info_hash", info)
    secret = labeled_extract(suite, shared, b"secret", b"")
    key = labeled_expand(suite, secret, b"key", ks_context, 32)
    nonce = labeled_expand(suite, secret, b"base_nonce", ks_context, 12)
    return enc, AESGCM(key).encrypt(nonce, pt, aad)

account = "alice@example.com"
main_key = bytes(0x80 + i for i in range(32))
device_secret = bytes(0x11 * (i % 7 + 1) % 256 for i in range(32))
machine_id = b"kat-machine-0001"

# PIN wrap: scrypt(PIN, salt) -> HKDF with the device pepper "pin-kdf" -> envelope of the MainKey.
pin, log_n, r, p = "246813", 10, 8, 1
salt = bytes(range(0xA0, 0xB0))
stretched = hashlib.scrypt(pin.encode(), salt=salt, n=1 << log_n, r=r, p=p, dklen=32, maxmem=1 << 28)
kek = hkdf(stretched, pepper(device_secret, machine_id, "pin-kdf"), b"coffer.pin-kek.v1", 32)
pin_wrap = b"CFPW" + bytes([1, log_n]) + struct.pack(">II", r, p) + salt + \
    envelope(kek, ["coffer.mainkey.pin.v1", account], bytes([7] * 12), main_key)

# Software secure element key file and the MainKey sealed to its public key.
label = "coffer.mainkey." + account
element_scalar = int.from_bytes(hashlib.sha256(b"kat element key").digest(), "big") % (2**256 - 2**224 - 1)
element = ec.derive_private_key(element_scalar, ec.SECP256R1())
element_raw = element.private_numbers().private_value.to_bytes(32, "big")
element_file = b"CFSE" + bytes([1]) + envelope(
    hkdf(device_secret, b"coffer.device.v1", b"pepper.software-secure-element\0" + machine_id, 32),
    ["coffer.secure-element.key.v1", label], bytes([9] * 12), element_raw)
ephemeral = ec.derive_private_key(int.from_bytes(hashlib.sha256(b"kat ephemeral").digest(), "big") % (2**255), ec.SECP256R1())
enc, sealed = hpke_seal(element.public_key(), ephemeral, b"coffer.mainkey.se.v1",
                        context(["coffer.mainkey.se.v1", account]), main_key)
element_wrap = b"CFSW" + bytes([1]) + struct.pack(">H", len(enc)) + enc + sealed

def locked(label, json_text, nonce):
    subkey = hkdf(main_key, b"coffer.mainkey.v1", b"coffer.mainkey.subkey.v1.locked." + label.encode(), 32)
    return envelope(subkey, ["coffer.locked.v1", label], nonce, json_text.encode())

vectors = {
    "account": account,
    "mainKey": main_key.hex(),
    "deviceSecret": device_secret.hex(),
    "machineID": machine_id.decode(),
    "pin": pin,
    "protection": [{"strategies": s, "record": (b"CFPR" + bytes([1, bits])).hex()}
                   for s, bits in ((["none"], 1), (["pin"], 2), (["secure-element"], 4), (["pin", "secure-element"], 6))],
    "attempts": [{"failures": f, "lastFailure": t, "record": (b"CFAT" + bytes([1, f]) + struct.pack(">q", t)).hex()}
                 for f, t in ((0, 0), (3, 1767225600), (9, -1))],
    "pinWrap": pin_wrap.hex(),
    "elementLabel": label,
    "elementFileName": hashlib.sha256(label.encode()).hexdigest() + ".key",
    "elementKeyFile": element_file.hex(),
    "elementWrap": element_wrap.hex(),
    "lockedAutolock": {"label": "settings.autolock", "json": '{"after":{"seconds":120}}',
                       "sealed": locked("settings.autolock", '{"after":{"seconds":120}}', bytes([3] * 12)).hex()},
    "lockedString": {"label": "account.token", "json": '"token-2718"',
                     "sealed": locked("account.token", '"token-2718"', bytes([4] * 12)).hex()},
}
out = pathlib.Path(__file__).with_name("keymaker_vectors.json")
out.write_text(json.dumps(vectors, indent=1) + "\n")
print(f"wrote {out}")
