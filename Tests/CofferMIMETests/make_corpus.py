#!/usr/bin/env python3
"""Writes a deterministic corpus of varied RFC 5322 / MIME messages for the CofferMIME differential test.

Usage: make_corpus.py OUTPUT_DIR [COUNT] [SEED]

Messages are assembled as raw text (not with Python's generator) so that folding, quoting, parameter styles and
line endings vary the way real mail does. Every message is valid enough that a correct parser has one right answer.
"""
import base64
import datetime
import os
import quopri
import random
import sys
import urllib.parse
from email.header import Header

WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et "
         "dolore magna aliqua meeting report budget invoice project update quarterly review draft final").split()
NATIVE = {
    "utf-8": ["café", "naïve", "Grüße", "Øresund", "Привет", "こんにちは", "Ελλάδα", "🎉", "Żółć", "“quoted”"],
    "iso-8859-1": ["café", "naïve", "Grüße", "Øresund", "señor", "façade", "½"],
    "iso-8859-15": ["café", "€uro", "œuvre", "Grüße", "Šárka"],
    "iso-8859-2": ["Żółć", "gęślą", "jaźń", "Dvořák", "Łódź"],
    "windows-1250": ["Žluťoučký", "kůň", "Łódź", "Dvořák", "šťastný", "„quote“"],
    "windows-1252": ["café", "“quotes”", "€uro", "naïve", "Œuvre", "—dash", "™"],
    "koi8-r": ["Привет", "мир", "Москва"],
    "us-ascii": [],
}
CHARSETS = list(NATIVE)
NAMES = ["Alice Example", "Bob O'Neil", "Carol", "Dave Q. Smith", "Eve", "Frank Müller", "Zoë Ångström",
         "Jörg Straße", "Łukasz Żółw", "Иван Петров"]
DOMAINS = ["example.com", "mail.example.org", "lists.example.net", "x.test"]


def latin1(raw):
    """Bytes as a str with one character per byte, so 8-bit content survives until the final encode."""
    return raw.decode("latin-1")


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.counter = 0
        self.tricky = False

    def chance(self, p):
        return self.r.random() < p

    def words(self, n, charset="us-ascii"):
        pool = WORDS + NATIVE[charset] * 2
        return " ".join(self.r.choice(pool) for _ in range(n))

    def local(self):
        return self.r.choice(["alice", "bob", "carol.smith", "d_e", "eve+tag", "frank", "info", "no-reply"])

    def addr(self):
        return f"{self.local()}@{self.r.choice(DOMAINS)}"

    def encoded(self, text, charset=None):
        charset = charset or self.r.choice(["utf-8", "iso-8859-1", "utf-8"])
        try:
            text.encode(charset)
        except UnicodeEncodeError:
            charset = "utf-8"
        if self.chance(0.5):
            return Header(text, charset).encode()
        raw = text.encode(charset)
        if self.chance(0.5):
            return f"=?{charset}?B?{base64.b64encode(raw).decode()}?="
        q = "".join(chr(b) if (chr(b).isalnum() and b < 128) else ("_" if b == 32 else f"={b:02X}") for b in raw)
        return f"=?{charset.upper() if self.chance(0.3) else charset}?Q?{q}?="

    def mailbox(self):
        if self.tricky and self.chance(0.5):
            return self.tricky_mailbox()
        kind = self.r.randrange(7)
        name = self.r.choice(NAMES)
        address = self.addr()
        if kind == 0:
            return address
        if kind == 1:
            return f"<{address}>"
        if kind == 2 and name.isascii() and "'" not in name and "." not in name:
            return f"{name} <{address}>"
        if kind == 3 and name.isascii():
            last, _, first = name.partition(" ")
            return f'"{first}, {last}" <{address}>' if first else f'"{name}" <{address}>'
        if kind == 4:
            return f"{address} ({name if name.isascii() else 'comment'})"
        if name.isascii():
            return f'"{name}" <{address}>'
        return f"{self.encoded(name)} <{address}>"

    def address_list(self, allow_group=True):
        items = []
        for _ in range(self.r.randrange(1, 4)):
            if allow_group and self.chance(0.12):
                members = ", ".join(self.mailbox() for _ in range(self.r.randrange(0, 3)))
                items.append(f"{self.r.choice(['Team', 'Friends', 'undisclosed-recipients'])}:{' ' if members else ''}{members};")
            else:
                items.append(self.mailbox())
        sep = ",\n\t" if self.chance(0.3) else ", "
        return sep.join(items)

    def date(self):
        dt = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
            seconds=self.r.randrange(0, 25 * 365 * 86400))
        offset = self.r.choice([0, 60, 120, -300, -420, 330, 600, -600, 0])
        local = dt.astimezone(datetime.timezone(datetime.timedelta(minutes=offset)))
        sign = "+" if offset >= 0 else "-"
        zone = f"{sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"
        day = local.strftime("%a")
        mon = local.strftime("%b")
        kind = self.r.randrange(10)
        if kind == 0:
            return f"{day}, {local.day} {mon} {local.year} {local:%H:%M:%S} {zone}"
        if kind == 1:
            return f"{local.day} {mon} {local.year} {local:%H:%M:%S} {zone}"
        if kind == 2:
            return f"{day}, {local.day:02d} {mon} {local.year % 100:02d} {local:%H:%M} {zone}"
        if kind == 3:
            return f"{day}, {local.day} {mon} {local.year} {local:%H:%M:%S} {zone} (XYZ)"
        if kind == 4:
            utc = dt
            return f"{utc:%a}, {utc.day} {utc:%b} {utc.year} {utc:%H:%M:%S} {self.r.choice(['GMT', 'UT', 'UTC', '-0000'])}"
        if kind == 5:
            utc = dt
            return f"{utc:%a} {utc:%b} {utc.day:2d} {utc:%H:%M:%S} {utc.year}"
        if kind == 6:
            est = dt.astimezone(datetime.timezone(datetime.timedelta(hours=-5)))
            return f"{est:%a}, {est.day} {est:%b} {est.year} {est:%H:%M:%S} EST"
        if kind == 7:
            return f"{day},{local.day} {mon} {local.year} {local:%H:%M:%S} {zone}"
        if kind == 8:
            return f"{day}, {local.day}  {mon}  {local.year}  {local:%H:%M:%S}  {zone}"
        return f"{day}, {local.day:02d} {mon} {local.year} {local:%H:%M:%S} {zone}"

    def tricky_subject(self):
        word = self.encoded(self.words(2, "utf-8"), "utf-8")
        kind = self.r.randrange(8)
        if kind == 0:
            return f"Re:{word}"
        if kind == 1:
            return f"{word}\t {self.words(2)}  {word}"
        if kind == 2:
            return word.replace("?Q?", "?q?").replace("?B?", "?b?")
        if kind == 3:
            return f"=?utf-8*en?q?{self.words(1)}?= tail"
        if kind == 4:
            return f"[list] {word}\n {word}\n\t{self.words(1)}"
        if kind == 5:
            return f"  leading and trailing  "
        if kind == 6:
            return f"=?utf-8?q?not closed {self.words(2)}"
        return f"{self.words(1)} =?unknown-8bit?q?abc?= {self.words(1)}"

    def tricky_mailbox(self):
        address = self.addr()
        kind = self.r.randrange(8)
        if kind == 0:
            return f'"Quote \\"Q\\" Person" <{address}>'
        if kind == 1:
            return f"Dr. J. R. R. Tolkien <{address}>"
        if kind == 2:
            return f"Name (with comment) Surname <{address}>"
        if kind == 3:
            return f'"{self.encoded("Zoë Ångström", "utf-8")}" <{address}>'
        if kind == 4:
            return f"<{address.upper()}>"
        if kind == 5:
            return f"Ann<{address}>"
        if kind == 6:
            return f"{self.encoded('Łukasz', 'utf-8')} {self.encoded('Żółw', 'iso-8859-2')} <{address}>"
        return f"{address} (Full Name)"

    def subject(self):
        if self.tricky:
            return self.tricky_subject()
        charset = self.r.choice(CHARSETS)
        text = self.words(self.r.randrange(1, 12), charset)
        kind = self.r.randrange(6)
        if text.isascii() and kind < 2:
            if len(text) > 40 and self.chance(0.6):
                cut = text.index(" ", 30) if " " in text[30:] else -1
                if cut > 0:
                    return text[:cut] + "\n " + text[cut + 1:]
            return text
        if kind == 2 and not text.isascii():
            # Raw 8-bit UTF-8 header (the message text is kept one character per byte, see latin1()).
            return ("Re: " if self.chance(0.3) else "") + latin1(text.encode("utf-8"))
        if kind == 3:
            prefix = "Re: " if self.chance(0.5) else ""
            return prefix + self.encoded(text, None if charset == "us-ascii" else charset)
        if charset == "us-ascii":
            charset = "utf-8"
        try:
            encoded = Header(text, charset, maxlinelen=self.r.choice([40, 76])).encode()
        except UnicodeEncodeError:
            encoded = Header(text, "utf-8").encode()
        return encoded

    def msgid(self):
        self.counter += 1
        return f"<{self.r.randrange(10**9)}.{self.counter}@{self.r.choice(DOMAINS)}>"

    # Bodies --------------------------------------------------------------------------------------------------

    def text_content(self, charset, html=False):
        lines = []
        for _ in range(self.r.randrange(1, 12)):
            line = self.words(self.r.randrange(0, 18), charset)
            if self.chance(0.1):
                line += "  "
            if self.chance(0.05):
                line = "From " + line
            if self.chance(0.05):
                line = "-- " + line
            if self.chance(0.05):
                line = "." + line
            lines.append(line)
        if html:
            inner = "".join(f"<p>{line}</p>\n" for line in lines)
            return f"<html><body>\n{inner}</body></html>\n"
        text = "\n".join(lines)
        return text + ("\n" if self.chance(0.8) else "")

    def text_part(self, subtype="plain", charset=None, extra_headers=""):
        charset = charset or self.r.choice(CHARSETS)
        text = self.text_content(charset, subtype == "html")
        raw = text.encode(charset)
        cte = self.r.choice(["7bit", "8bit", "quoted-printable", "base64", None])
        if not raw.isascii() and cte in ("7bit", None):
            cte = "8bit"
        if cte == "quoted-printable":
            body = quopri.encodestring(raw).decode("ascii")
        elif cte == "base64":
            body = base64.encodebytes(raw).decode("ascii")
        else:
            body = latin1(raw)
        quoted = f'"{charset}"' if self.chance(0.5) else charset
        if self.chance(0.2):
            quoted = quoted.upper()
        headers = f"Content-Type: text/{subtype}; charset={quoted}\n"
        if self.chance(0.2):
            headers = f"Content-Type: text/{subtype};\n\tcharset={quoted}\n"
        if self.chance(0.1):
            headers = headers.replace("Content-Type", "Content-type")
        if self.tricky and self.chance(0.5):
            headers = self.r.choice([
                f"Content-Type: text/{subtype} ; Charset = {quoted} ;\n",
                f"content-type: TEXT/{subtype.upper()}; format=flowed; charset={quoted}; delsp=yes\n",
                f"Content-Type: text/{subtype};\n charset*=us-ascii'en'{charset}\n",
            ])
            if raw.isascii() and self.chance(0.3):
                headers = f"Content-Type: text/{subtype}\n"
        if cte:
            if self.tricky and self.chance(0.4):
                cte = self.r.choice([cte.upper(), cte.title(), f"  {cte}"])
            headers += f"Content-Transfer-Encoding: {cte}\n"
        if self.tricky and cte and cte.strip().lower() == "base64" and self.chance(0.4):
            body = body.replace("=", "")
        if self.tricky and self.chance(0.1):
            body = ""
        return headers + extra_headers, body

    def filename_params(self, name):
        if self.tricky and name.isascii() and self.chance(0.4):
            return self.r.choice([f'filename = "{name}"', f'FileName="{name}"', f'filename="a \\"b\\" {name}"',
                                  f'filename="{name}";', f"filename*=''{urllib.parse.quote(name)}"])
        kind = self.r.randrange(6)
        if name.isascii():
            if kind < 2 and " " not in name:
                return f"filename={name}"
            if kind == 5:
                half = len(name) // 2
                return f'filename*0="{name[:half]}"; filename*1="{name[half:]}"'
            return f'filename="{name}"'
        encoded = urllib.parse.quote(name.encode("utf-8"), safe="")
        if kind < 2:
            return f"filename*=utf-8''{encoded}"
        if kind == 2:
            cut = len(encoded) // 2
            while cut > 0 and "%" in encoded[cut - 2:cut]:
                cut -= 1
            return f"filename*0*=utf-8''{encoded[:cut]};\n filename*1*={encoded[cut:]}"
        if kind == 3:
            try:
                latin = urllib.parse.quote(name.encode("iso-8859-1"), safe="")
                return f"filename*=iso-8859-1'en'{latin}"
            except UnicodeEncodeError:
                return f"filename*=UTF-8''{encoded}"
        return f'filename="{self.encoded(name, "utf-8")}"'

    def attachment(self):
        base = self.r.choice(["report", "invoice 2024", "résumé", "Übersicht", "photo", "data", "notes", "план"])
        ext, ctype = self.r.choice([(".pdf", "application/pdf"), (".png", "image/png"), (".bin", "application/octet-stream"),
                                    (".zip", "application/zip"), (".txt", "text/plain")])
        name = base + ext
        payload = bytes(self.r.randrange(256) for _ in range(self.r.randrange(0, 900)))
        if ctype == "text/plain":
            payload = self.text_content("us-ascii").encode()
        body = base64.encodebytes(payload).decode("ascii")
        params = self.filename_params(name)
        if self.chance(0.2) and name.isascii():
            headers = f'Content-Type: {ctype}; name="{name}"\n'
        else:
            headers = f"Content-Type: {ctype}\n"
            disposition = self.r.choice(["attachment", "attachment", "inline"])
            headers += f"Content-Disposition: {disposition}; {params}\n"
        headers += "Content-Transfer-Encoding: base64\n"
        return headers, body

    def image(self):
        cid = f"img{self.r.randrange(10**6)}@{self.r.choice(DOMAINS)}"
        payload = b"\x89PNG\r\n\x1a\n" + bytes(self.r.randrange(256) for _ in range(self.r.randrange(10, 300)))
        headers = f"Content-Type: image/png\nContent-ID: <{cid}>\nContent-Transfer-Encoding: base64\n"
        if self.chance(0.5):
            headers += "Content-Disposition: inline\n"
        return headers, base64.encodebytes(payload).decode("ascii")

    def boundary(self):
        kind = self.r.randrange(4)
        if kind == 0:
            return f"----=_Part_{self.r.randrange(10**6)}_{self.r.randrange(10**9)}.{self.r.randrange(10**12)}"
        if kind == 1:
            return f"{self.r.randrange(16**24):024x}"
        if kind == 2:
            return f"=_{self.r.randrange(10**8)}=_"
        return f"b{self.r.randrange(1000)}"

    def multipart(self, subtype, parts):
        b = self.boundary()
        quoted = f'"{b}"' if (self.chance(0.6) or "=" in b) else b
        headers = f"Content-Type: multipart/{subtype}; boundary={quoted}\n"
        if self.chance(0.3):
            headers = f"Content-Type: multipart/{subtype};\n\tboundary={quoted}\n"
        body = ""
        if self.chance(0.3):
            body += "This is a multi-part message in MIME format.\n"
        if self.tricky and self.chance(0.3):
            body += f"--{b}x is not a delimiter\n--\n"
        for part_headers, part_body in parts:
            if not part_body.endswith("\n") or self.chance(0.3):
                part_body += "\n"
            if self.tricky and self.chance(0.2) and "base64" not in (part_headers + part_body).lower():
                part_body += f"--{b}-not-a-delimiter\n"
            pad = self.r.choice(["", " ", "\t "]) if self.tricky else ""
            body += f"--{b}{pad}\n{part_headers}\n{part_body}"
        body += f"--{b}--{self.r.choice(['', '  ']) if self.tricky else ''}\n"
        if self.chance(0.2):
            body += "epilogue text\n"
        return headers, body

    def alternative(self):
        charset = self.r.choice(CHARSETS)
        return self.multipart("alternative", [self.text_part("plain", charset), self.text_part("html", charset)])

    def related(self):
        html = self.text_part("html")
        return self.multipart("related", [html] + [self.image() for _ in range(self.r.randrange(1, 3))])

    def inner_message(self):
        headers = f"From: {self.mailbox()}\nSubject: {self.subject()}\nDate: {self.date()}\n"
        if self.chance(0.5):
            part_headers, body = self.text_part()
        else:
            part_headers, body = self.alternative()
        return "Content-Type: message/rfc822\n", headers + "MIME-Version: 1.0\n" + part_headers + "\n" + body

    def digest(self):
        parts = []
        for _ in range(self.r.randrange(1, 4)):
            _, inner = self.inner_message()
            parts.append(("", inner))
        return self.multipart("digest", parts)

    def headerless_part(self):
        return "", self.text_content("us-ascii")

    def body(self):
        if self.tricky and self.chance(0.4):
            kind = self.r.randrange(3)
            if kind == 0:
                return self.digest()
            if kind == 1:
                return self.multipart("mixed", [self.headerless_part(), self.attachment(), self.text_part()])
            return self.multipart("mixed", [self.text_part(), self.inner_message(), self.inner_message()])
        kind = self.r.randrange(9)
        if kind == 0:
            return self.text_part("plain")
        if kind == 1:
            return self.text_part("html")
        if kind == 2:
            return self.alternative()
        if kind == 3:
            first = self.text_part() if self.chance(0.5) else self.alternative()
            return self.multipart("mixed", [first] + [self.attachment() for _ in range(self.r.randrange(1, 4))])
        if kind == 4:
            alt = self.multipart("alternative", [self.text_part("plain"), self.related()])
            return self.multipart("mixed", [alt] + [self.attachment() for _ in range(self.r.randrange(0, 3))])
        if kind == 5:
            return self.related()
        if kind == 6:
            return self.multipart("mixed", [self.text_part(), self.inner_message()])
        if kind == 7:
            # No Content-Type at all: plain US-ASCII text.
            return "", self.text_content("us-ascii")
        return self.multipart("mixed", [self.text_part() for _ in range(self.r.randrange(1, 4))])

    def message(self):
        self.tricky = self.chance(0.35)
        lines = []
        if self.chance(0.05):
            lines.append("From MAILER-DAEMON Thu Jan  1 00:00:00 1970")
        if self.chance(0.4):
            lines.append(f"Received: from mx.{self.r.choice(DOMAINS)} (mx [192.0.2.{self.r.randrange(255)}])\n"
                         f"\tby mail.example.com with ESMTPS id {self.r.randrange(16**10):x};\n\t{self.date()}")
        lines.append(f"From: {self.mailbox()}")
        lines.append(f"To: {self.address_list()}")
        if self.chance(0.4):
            lines.append(f"Cc: {self.address_list()}")
        lines.append(f"Subject: {self.subject()}")
        if self.chance(0.9):
            lines.append(f"Date: {self.date()}")
        lines.append(f"Message-ID: {self.msgid()}")
        if self.chance(0.3):
            parent = self.msgid()
            lines.append(f"In-Reply-To: {parent}")
            refs = [self.msgid() for _ in range(self.r.randrange(0, 4))] + [parent]
            lines.append("References: " + "\n ".join(refs))
        if self.chance(0.3):
            lines.append(f"X-Mailer: {self.r.choice(['Coffer 1.0', 'Thunderbird 115.0', 'Apple Mail (2.3731)'])}")
        if self.chance(0.2):
            lines.append(f"Thread-Topic: {self.encoded(self.words(3, 'utf-8'))}")
        if self.tricky and self.chance(0.3):
            lines.append(self.r.choice(["X-Empty:", "X-Spaces:   ", "SUBJECT-Like: x", "X-Tab:\tvalue"]))
        headers, body = self.body()
        if headers:
            lines.append("MIME-Version: 1.0")
        text = "\n".join(lines) + "\n" + headers + "\n" + body
        if self.chance(0.15):
            text = text.replace("\n", "\r\n")
        return text.encode("latin-1")


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20240501
    os.makedirs(out, exist_ok=True)
    gen = Gen(seed)
    for index in range(count):
        with open(os.path.join(out, f"msg{index:04d}.eml"), "wb") as handle:
            handle.write(gen.message())


if __name__ == "__main__":
    main()
