#!/usr/bin/env python3
"""nh3 (ammonia) rounds on the HTML files of a folder, for coffer-bench's `sanitize` section.

Started as `bench_nh3.py FOLDER`, it reads the files, runs each profile once to warm up and prints `ready`. Then each
line on standard input names a profile, `default` (nh3.clean with its defaults) or `mail` (tables and their
presentational attributes, font, center, images, inline styles filtered to an allow-list of properties), and the
script answers with the MB/s of one pass of that profile over every file. coffer-bench keeps this process running so
that nh3's rounds alternate with Coffer's in the same run, on one core.
"""

import pathlib
import sys
import time

import nh3

MAIL_TAGS = set(nh3.ALLOWED_TAGS) | {
    "table", "thead", "tbody", "tfoot", "tr", "td", "th", "caption", "col", "colgroup", "center", "font", "img",
    "div", "span", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "map", "area", "u", "s", "small", "big",
}
COMMON = {"style", "class", "id", "align", "valign", "bgcolor", "width", "height", "border", "dir", "lang", "title",
          "role", "cellpadding", "cellspacing", "background", "color"}
MAIL_ATTRIBUTES = {tag: set(COMMON) for tag in MAIL_TAGS}
MAIL_ATTRIBUTES["a"] |= {"href", "target", "name"}
MAIL_ATTRIBUTES["img"] |= {"src", "alt", "srcset"}
MAIL_ATTRIBUTES["font"] |= {"face", "size"}
MAIL_ATTRIBUTES["area"] |= {"href", "shape", "coords", "alt"}
CSS_PROPERTIES = {
    "color", "background", "background-color", "background-image", "font", "font-family", "font-size",
    "font-weight", "font-style", "line-height", "text-align", "text-decoration", "padding", "margin", "border",
    "border-radius", "width", "max-width", "height", "display", "vertical-align", "opacity", "overflow",
    "max-height", "border-collapse", "border-width", "letter-spacing", "white-space",
}


def mail(html):
    return nh3.clean(
        html,
        tags=MAIL_TAGS,
        attributes=MAIL_ATTRIBUTES,
        url_schemes={"http", "https", "mailto", "tel", "cid", "data"},
        filter_style_properties=CSS_PROPERTIES,
        link_rel="noopener noreferrer",
    )


def one_round(documents, total, clean):
    start = time.perf_counter()
    for document in documents:
        clean(document)
    return total / 1e6 / (time.perf_counter() - start)


def main():
    folder = pathlib.Path(sys.argv[1])
    documents = [path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.html"))]
    total = sum(len(document.encode("utf-8")) for document in documents)
    profiles = {"default": nh3.clean, "mail": mail}
    for clean in profiles.values():
        one_round(documents, total, clean)
    print("ready", flush=True)
    for line in sys.stdin:
        clean = profiles.get(line.strip())
        if clean is None:
            sys.exit("unknown profile: " + line.strip())
        print(one_round(documents, total, clean), flush=True)


if __name__ == "__main__":
    main()
