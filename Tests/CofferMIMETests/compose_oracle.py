#!/usr/bin/env python3
"""Python's `email` package as the other side of CofferMIME's writer round trips.

Usage:
  compose_oracle.py read DIR OUTPUT.json     parse every DIR/*.eml (written by Coffer) with policy.default and record
                                             what a reader sees, with every defect Python found
  compose_oracle.py write SPEC.json DIR      write each message of SPEC.json with EmailMessage (policy.SMTP: CRLF)
                                             as DIR/<name>.eml, for CofferMIME's parser to read

The recorded view matches ComposedView in ComposeShapes.swift: decoded subject, addresses as [display name, addr-spec],
message IDs without angle brackets, other header fields, text bodies with LF line breaks, attachments' bytes in base64.
"""
import base64
import datetime
import email
import email.policy
import email.utils
import json
import os
import re
import sys
from email.headerregistry import Address
from email.message import EmailMessage

OWN = {"date", "from", "reply-to", "to", "cc", "bcc", "subject", "message-id", "in-reply-to", "references",
       "mime-version", "content-type", "content-transfer-encoding", "content-disposition"}


def addresses(msg, name):
    header = msg[name]
    if header is None:
        return []
    return [[a.display_name or "", a.addr_spec] for group in header.groups for a in group.addresses]


def ids(value):
    return re.findall(r"<([^>]*)>", "" if value is None else str(value))


def lf(text):
    return text.replace("\r\n", "\n").replace("\r", "\n")


def defects(msg):
    found = []
    for part in msg.walk():
        found += [type(d).__name__ for d in part.defects]
        for name, value in part.items():
            found += [f"{name}: {type(d).__name__}" for d in getattr(value, "defects", ())]
    return found


def view(raw):
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    body = msg.get_body(preferencelist=("plain",))
    html = msg.get_body(preferencelist=("html",))
    attachments = []
    for part in msg.iter_attachments():
        attachments.append({
            "filename": part.get_filename(),
            "type": part.get_content_type(),
            "data": base64.b64encode(part.get_payload(decode=True) or b"").decode("ascii"),
        })
    date = msg["date"]
    subject = msg["subject"]
    return {
        "subject": str(subject).strip() if subject is not None else None,
        "from": addresses(msg, "from"),
        "to": addresses(msg, "to"),
        "cc": addresses(msg, "cc"),
        "replyTo": addresses(msg, "reply-to"),
        "messageID": (ids(msg["message-id"]) or [None])[0],
        "inReplyTo": ids(msg["in-reply-to"]),
        "references": ids(msg["references"]),
        "extra": [[name, str(value).strip()] for name, value in msg.items() if name.lower() not in OWN],
        "text": lf(body.get_content()) if body is not None and body.get_content_type() == "text/plain" else None,
        "html": lf(html.get_content()) if html is not None and html.get_content_type() == "text/html" else None,
        "attachments": attachments,
        "date": date.datetime.timestamp() if date is not None and date.datetime is not None else None,
        "hasBcc": msg["bcc"] is not None,
        "defects": defects(msg),
    }


def read(folder, output):
    results = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".eml"):
            with open(os.path.join(folder, name), "rb") as handle:
                results[name] = view(handle.read())
    with open(output, "w", encoding="utf-8") as handle:
        json.dump(results, handle, ensure_ascii=False, sort_keys=True)


def address(pair):
    local, _, domain = pair[1].rpartition("@")
    if local.startswith('"') and local.endswith('"'):
        local = local[1:-1]
    return Address(display_name=pair[0], username=local, domain=domain)


def write(spec_path, folder):
    with open(spec_path, encoding="utf-8") as handle:
        specs = json.load(handle)
    os.makedirs(folder, exist_ok=True)
    for spec in specs:
        msg = EmailMessage()
        msg["Date"] = email.utils.format_datetime(
            datetime.datetime.fromtimestamp(spec["date"], tz=datetime.timezone.utc))
        msg["From"] = address(spec["from"])
        if spec["replyTo"]:
            msg["Reply-To"] = [address(a) for a in spec["replyTo"]]
        if spec["to"]:
            msg["To"] = [address(a) for a in spec["to"]]
        if spec["cc"]:
            msg["Cc"] = [address(a) for a in spec["cc"]]
        if spec["subject"].strip():
            msg["Subject"] = spec["subject"]
        msg["Message-ID"] = "<" + spec["messageID"] + ">"
        if spec["inReplyTo"]:
            msg["In-Reply-To"] = " ".join("<" + i + ">" for i in spec["inReplyTo"])
        if spec["references"]:
            msg["References"] = " ".join("<" + i + ">" for i in spec["references"])
        for name, value in spec["extra"]:
            msg[name] = value
        msg.set_content(spec["text"])
        if spec.get("html") is not None:
            msg.add_alternative(spec["html"], subtype="html")
        for attachment in spec["attachments"]:
            maintype, subtype = attachment["type"].split("/")
            msg.add_attachment(base64.b64decode(attachment["data"]), maintype=maintype, subtype=subtype,
                               filename=attachment.get("filename"))
        with open(os.path.join(folder, spec["name"] + ".eml"), "wb") as handle:
            handle.write(msg.as_bytes(policy=email.policy.SMTP))


def main():
    if sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: compose_oracle.py read DIR OUTPUT.json | write SPEC.json DIR")


if __name__ == "__main__":
    main()
