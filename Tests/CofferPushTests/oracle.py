#!/usr/bin/env python3
"""Interop oracle for CofferPush: Python's http_ece, cryptography and py_vapid against the Swift implementation.

Usage: oracle.py INPUT.json OUTPUT.json (run with the repository's .venv python; scripts/setup.sh installs the
packages). All byte strings are base64url without padding. The Swift test (OracleTests.swift) writes INPUT, reads
OUTPUT and checks every value; this script only decrypts, encrypts and verifies, and exits non-zero on any failure
with the reason on standard error.
"""
import base64
import json
import sys
import time

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from py_vapid import Vapid02


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def verify_vapid(header, audience, now):
    """Checks a Swift `vapid t=..., k=...` header with cryptography alone (not the code under test)."""
    scheme, _, rest = header.partition(" ")
    assert scheme.lower() == "vapid", "scheme is not vapid"
    params = dict(p.strip().split("=", 1) for p in rest.split(","))
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64d(params["k"]))
    head, payload, signature = params["t"].split(".")
    assert json.loads(b64d(head)) == {"typ": "JWT", "alg": "ES256"}, "unexpected JOSE header"
    raw = b64d(signature)
    assert len(raw) == 64, "signature is not 64 octets"
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key.verify(der, (head + "." + payload).encode("ascii"), ec.ECDSA(hashes.SHA256()))
    claims = json.loads(b64d(payload))
    assert claims["aud"] == audience, "aud differs"
    assert now < claims["exp"] <= now + 86400, "exp not within 24 hours"
    assert claims["sub"].startswith(("mailto:", "https:")), "sub is not mailto: or https:"
    return claims


def main():
    with open(sys.argv[1]) as f:
        job = json.load(f)
    out = {}

    # Swift (application server) -> Python (user agent): decrypt with the user agent's private key.
    ua = ec.derive_private_key(int.from_bytes(b64d(job["ua_private"]), "big"), ec.SECP256R1())
    auth = b64d(job["auth"])
    out["decrypted"] = [
        b64e(http_ece.decrypt(b64d(body), private_key=ua, auth_secret=auth, version="aes128gcm"))
        for body in job["swift_bodies"]
    ]

    # Python (application server) -> Swift (user agent): encrypt to the Swift keys with a fresh ephemeral key.
    ua_public = b64d(job["swift_ua_public"])
    swift_auth = b64d(job["swift_auth"])
    out["python_bodies"] = []
    for plaintext in job["python_plaintexts"]:
        ephemeral = ec.generate_private_key(ec.SECP256R1())
        out["python_bodies"].append(
            b64e(
                http_ece.encrypt(
                    b64d(plaintext),
                    private_key=ephemeral,
                    dh=ua_public,
                    auth_secret=swift_auth,
                    version="aes128gcm",
                )
            )
        )

    # Plain RFC 8188 with a key, a key id and small records, both ways.
    ece = job["ece"]
    key = b64d(ece["key"])
    out["ece_decrypted"] = [b64e(http_ece.decrypt(b64d(body), key=key, version="aes128gcm")) for body in ece["swift_bodies"]]
    out["ece_bodies"] = [
        b64e(http_ece.encrypt(b64d(p), key=key, keyid=ece["keyid"], rs=ece["rs"], version="aes128gcm"))
        for p in ece["plaintexts"]
    ]

    # VAPID: verify Swift's header; sign one with py_vapid for Swift to verify.
    now = job["now"]
    out["vapid_claims"] = verify_vapid(job["vapid_header"], job["audience"], now)
    signer = Vapid02()
    signer.generate_keys()
    out["python_vapid_header"] = signer.sign(
        {"aud": job["audience"], "exp": now + 3600, "sub": "mailto:oracle@example.org"}
    )["Authorization"]

    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, InvalidSignature, http_ece.ECEException, KeyError, ValueError) as error:
        print(f"oracle: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
