#!/usr/bin/env python3
"""Reference results for the CofferMIME differential test, from Python's standard `email` package.

Usage: oracle.py CORPUS_DIR OUTPUT.json

Uses `email.policy.default` (the RFC 5322/6532-conformant policy: RFC 2047 words decoded per RFC, RFC 2231
parameters joined and decoded, addresses parsed into display name and addr-spec with groups). For each *.eml file it
records the selected decoded headers, the part tree in walk() order, the decoded text of text/* leaves, file names,
Content-IDs, dispositions and the decoded bytes of other leaves. Raw 8-bit header bytes are read as UTF-8 with
replacement characters, the same as `str()` of a policy.default header.
"""
import base64
import datetime
import email
import email.policy
import json
import os
import re
import sys

STRUCTURED = {"from", "to", "cc", "bcc", "sender", "reply-to", "date", "message-id", "mime-version",
              "content-type", "content-disposition", "content-transfer-encoding", "in-reply-to", "references"}


def clean(text):
    if text is None:
        return None
    return str(text).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def addresses(msg, name):
    header = msg[name]
    if header is None:
        return []
    result = []
    for group in header.groups:
        for address in group.addresses:
            result.append([clean(address.display_name), clean(address.addr_spec), clean(group.display_name)])
    return result


def message_ids(value):
    return re.findall(r"<([^>]*)>", "" if value is None else str(value).replace(" ", "").replace("\t", ""))


def date(msg):
    header = msg["date"]
    if header is None or header.datetime is None:
        return None
    moment = header.datetime
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def parts(msg):
    result = []
    for part in msg.walk():
        entry = {"type": part.get_content_type()}
        filename = part.get_filename()
        entry["filename"] = clean(filename)
        cid = part["content-id"]
        entry["cid"] = clean(str(cid).strip().strip("<>").strip()) if cid is not None else None
        entry["disposition"] = part.get_content_disposition()
        if not part.is_multipart():
            if part.get_content_maintype() == "text":
                entry["text"] = clean(part.get_content())
            elif part.get_content_maintype() != "message":
                payload = part.get_payload(decode=True) or b""
                entry["data"] = base64.b64encode(payload).decode("ascii")
        result.append(entry)
    return result


def describe(raw):
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    subject = msg["subject"]
    mid = msg["message-id"]
    other = []
    for name, value in msg.items():
        if name.lower() not in STRUCTURED:
            other.append([name, clean(value)])
    return {
        "subject": clean(subject).strip() if subject is not None else None,
        "from": addresses(msg, "from"),
        "to": addresses(msg, "to"),
        "cc": addresses(msg, "cc"),
        "date": date(msg),
        "messageID": (message_ids(mid) or [None])[0] if mid is not None else None,
        "inReplyTo": message_ids(msg["in-reply-to"]),
        "references": message_ids(msg["references"]),
        "headerNames": list(msg.keys()),
        "headers": other,
        "parts": parts(msg),
    }


def main():
    corpus, output = sys.argv[1], sys.argv[2]
    results = {}
    for name in sorted(os.listdir(corpus)):
        if not name.endswith(".eml"):
            continue
        with open(os.path.join(corpus, name), "rb") as handle:
            raw = handle.read()
        try:
            results[name] = {"ok": describe(raw)}
        except Exception as error:  # recorded, compared as "oracle failed"
            results[name] = {"error": type(error).__name__}
    with open(output, "w", encoding="utf-8") as handle:
        json.dump(results, handle, ensure_ascii=False, sort_keys=True)


if __name__ == "__main__":
    main()
