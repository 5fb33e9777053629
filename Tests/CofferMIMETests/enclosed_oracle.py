#!/usr/bin/env python3
"""Python's `email` package reads a message CofferMIME wrote with an attached message (message/rfc822).

Usage:
  enclosed_oracle.py MESSAGE.eml OUTPUT.json

Records, for each message/rfc822 part: its filename, Content-Transfer-Encoding, the enclosed message's subject and
body text as Python parses them, and the part's body bytes as they stand in MESSAGE.eml (cut at the outer boundary,
found by Python), in hex, so the caller can compare them with the original byte for byte. Also every defect Python
found anywhere in the message.
"""
import email
import email.policy
import json
import sys


def main(path, output):
    with open(path, "rb") as handle:
        raw = handle.read()
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    defects = [type(d).__name__ for part in msg.walk() for d in part.defects]
    boundary = msg.get_boundary()
    # The raw parts between the outer delimiters (RFC 2046 5.1.1: the CRLF before "--" belongs to the delimiter).
    pieces = raw.split(b"\r\n--" + boundary.encode("ascii")) if boundary else []
    raw_bodies = []
    for piece in pieces[1:]:
        if piece.startswith(b"--"):
            break
        head, _, body = piece.partition(b"\r\n\r\n")
        if b"message/rfc822" in head.lower():
            raw_bodies.append(body.hex())
    enclosed = []
    for part in msg.iter_attachments():
        if part.get_content_type() != "message/rfc822":
            continue
        inner = part.get_payload()[0]
        text = inner.get_body(preferencelist=("plain",))
        enclosed.append({
            "filename": part.get_filename(),
            "disposition": part.get_content_disposition(),
            "encoding": part["content-transfer-encoding"],
            "subject": str(inner["subject"]) if inner["subject"] is not None else None,
            "text": text.get_content().replace("\r\n", "\n") if text is not None else None,
            "innerAttachments": [a.get_filename() for a in inner.iter_attachments()],
        })
    with open(output, "w", encoding="utf-8") as handle:
        json.dump({"enclosed": enclosed, "rawBodies": raw_bodies, "defects": defects}, handle, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
