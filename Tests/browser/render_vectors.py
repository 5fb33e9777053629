#!/usr/bin/env python3
"""Renders every DOMPurify fixture and HTTP-leak vector, sanitized by `coffer render`, in headless Chromium.

Each sanitized page is opened from a file:// URL under the Content Security Policy that `coffer render` put in
it (remote content blocked). Chromium resolves every host name to a loopback HTTP server
(`--host-resolver-rules=MAP * 127.0.0.1:PORT`) that counts each connection, so any request that escapes the
sanitizer and the CSP reaches the counter instead of failing to resolve. Per page the harness also records
every request Chromium makes (`page.on("request")`), every dialog (alert, confirm, prompt, print), every page
error, every console message, and every script compiled in the page's main world (DevTools
`Debugger.scriptParsed`): with nothing able to run, a page compiles no script at all. After loading, the
harness fires mouse and focus events at every element from an isolated world, so a surviving event handler
would run (and compile) in the main world.

A control run first proves the harness sees what it must: canary pages without a CSP (an image from a remote
host, an inline script, an `onerror` handler) and the raw, unsanitized HTTP-leak and DOMPurify payloads without
the CSP must register requests and script executions.

Each sanitized page is also opened with its CSP removed (the sanitizer alone, as a library user without Coffer's
page gets it): remote-content blocking must hold without the CSP too. The project's own CSS custom-property and
escape vectors (`Tests/Fixtures/css-substitution/vectors.json`) join the corpus; those marked as tracking pixels are
also rendered with `--allow-remote` and must still load nothing without the CSP.

Pass: every sanitized vector, with and without its CSP, makes zero requests and runs zero scripts, and the control
registers hits.
Prints `browser: N passed, M failed` (N vectors plus the control checks) and exits non-zero on any failure.

Usage: render_vectors.py [--coffer PATH] [--chromium PATH] [--jobs N] [--verbose]
"""

import argparse
import asyncio
import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

from playwright.async_api import async_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "Tests" / "Fixtures"

# Fired at every element after load, from an isolated world, to wake any surviving handler.
PROBE = """
(() => {
  const kinds = ['mouseover', 'mouseenter', 'mousemove', 'mousedown', 'mouseup', 'focus', 'focusin', 'blur',
                 'pointerover', 'pointerenter', 'animationstart', 'transitionend', 'load', 'error', 'toggle'];
  let fired = 0;
  for (const element of document.querySelectorAll('*')) {
    for (const kind of kinds) {
      element.dispatchEvent(new Event(kind, { bubbles: false }));
      fired += 1;
    }
  }
  return fired;
})()
"""


# Schemes that never reach the network. The sanitizer replaces a blocked CSS url() with about:invalid, which
# Chromium still "requests" (and the CSP refuses); those are counted apart.
INERT_SCHEMES = {"about", "data", "blob"}

# Chromium's own service hosts, which the browser process contacts whatever the pages do (sign-in cookie checks,
# component updates, network time). No vector names them (checked at start), so a connection to one of them is the
# browser's, not a page's; they are counted apart.
BROWSER_SERVICE_HOSTS = {
    "accounts.google.com",
    "update.googleapis.com",
    "clients2.google.com",
    "clientservices.googleapis.com",
    "content-autofill.googleapis.com",
    "optimizationguide-pa.googleapis.com",
    "redirector.gvt1.com",
    "safebrowsingohttpgateway.googleapis.com",
}


def is_browser_service(hit):
    host = hit[len("TLS to ") :] if hit.startswith("TLS to ") else hit.split(" ", 1)[0]
    return host.split(":", 1)[0].lower() in BROWSER_SERVICE_HOSTS


class CountingServer(socketserver.ThreadingTCPServer):
    """Counts every connection to 127.0.0.1:PORT and records what was asked (HTTP or not)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), CountingHandler)
        self.lock = threading.Lock()
        self.hits = []

    def record(self, line):
        with self.lock:
            self.hits.append(line)

    def take(self):
        with self.lock:
            hits, self.hits = self.hits, []
        return hits


class CountingHandler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.settimeout(2)
        try:
            data = self.request.recv(4096)
        except OSError:
            data = b""
        first = data.split(b"\r\n", 1)[0][:200].decode("latin-1", "replace")
        host = ""
        for line in data.split(b"\r\n")[1:]:
            if line.lower().startswith(b"host:"):
                host = line[5:].strip().decode("latin-1", "replace")
        if data[:1] == b"\x16":
            self.server.record(f"TLS to {tls_server_name(data) or '(no server name)'}")
        else:
            self.server.record(f"{host} {first}" if first else "(connection without a request line)")
        body = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,"
        body += b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
        try:
            self.request.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: image/gif\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
        except OSError:
            pass


def tls_server_name(data):
    """The server name of a TLS ClientHello, or None."""
    try:
        at = 5 + 4 + 2 + 32  # record header, handshake header, version, random
        at += 1 + data[at]  # session id
        at += 2 + int.from_bytes(data[at : at + 2], "big")  # cipher suites
        at += 1 + data[at]  # compression methods
        end = at + 2 + int.from_bytes(data[at : at + 2], "big")
        at += 2
        while at + 4 <= end:
            kind = int.from_bytes(data[at : at + 2], "big")
            length = int.from_bytes(data[at + 2 : at + 4], "big")
            if kind == 0:
                name_length = int.from_bytes(data[at + 7 : at + 9], "big")
                return data[at + 9 : at + 9 + name_length].decode("ascii", "replace")
            at += 4 + length
    except IndexError:
        return None
    return None


def load_vectors():
    vectors = []
    purify = json.loads((TESTDATA / "dompurify" / "expect.json").read_text())
    for index, case in enumerate(purify):
        vectors.append((f"dompurify-{index:03d}", case["payload"]))
    leaks = json.loads((TESTDATA / "httpleaks" / "httpleaks.json").read_text())
    for vector in leaks["vectors"]:
        vectors.append((vector["id"], vector["payload_html"]))
    css = json.loads((TESTDATA / "css-substitution" / "vectors.json").read_text())["vectors"]
    for vector in css:
        vectors.append((f"css-{vector['id']}", vector["html"]))
    trackers = {f"css-{vector['id']}" for vector in css if vector["tracker"]}
    return vectors, len(purify), len(leaks["vectors"]), len(css), trackers


CSP_META = re.compile(r'<meta http-equiv="Content-Security-Policy" content="[^"]*">')


def without_csp(page):
    """The page with its CSP <meta> removed (it must have exactly one)."""
    text = page.read_text(encoding="utf-8")
    stripped, count = CSP_META.subn("", text)
    if count != 1 or "Content-Security-Policy" in stripped:
        raise RuntimeError(f"{page.name}: expected one CSP <meta>, found {count}")
    target = page.with_name(page.name.replace(".page.html", ".nocsp.html"))
    target.write_text(stripped, encoding="utf-8")
    return target


def sanitize_all(coffer, vectors, folder, jobs, allow_remote=frozenset()):
    """Writes each payload to NAME.html and its sanitized page to NAME.page.html with `coffer render --output`
    (with `--allow-remote` for the names in `allow_remote`, as NAME-allow.page.html)."""

    def one(item):
        name, payload = item
        source = folder / f"{name}.html"
        allow = name in allow_remote
        target = folder / f"{name}{'-allow' if allow else ''}.page.html"
        source.write_text(payload, encoding="utf-8")
        result = subprocess.run(
            [coffer, "render", str(source), "--output", str(target)] + (["--allow-remote"] if allow else []),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"coffer render failed for {name}: {result.stderr.strip()}")
        blocked = result.stderr.split(" ", 1)[0]
        return name, target, int(blocked) if blocked.isdigit() else 0

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, vectors))


class Observer:
    """Everything one page did while it was observed."""

    def __init__(self):
        self.requests = []
        self.scripts = []
        self.dialogs = []
        self.errors = []
        self.console = []
        self.default_contexts = set()

    @property
    def network_requests(self):
        """Requests that could leave the browser: anything but the inert about:, data: and blob: URLs."""
        return [line for line in self.requests if line.split(" ", 1)[1].split(":", 1)[0] not in INERT_SCHEMES]

    @property
    def executions(self):
        return len(self.scripts) + len(self.dialogs) + len(self.errors)


class Tab:
    """One page kept open for many vectors: its hooks report into the observer of the vector being shown."""

    def __init__(self, page, cdp):
        self.page = page
        self.cdp = cdp
        self.seen = Observer()
        self.url = ""

    @classmethod
    async def open(cls, context):
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)
        tab = cls(page, cdp)

        def on_request(request):
            if request.url != tab.url and request.url != "about:blank":
                tab.seen.requests.append(f"{request.resource_type} {request.url[:160]}")

        def on_context(event):
            if event["context"].get("auxData", {}).get("isDefault"):
                tab.seen.default_contexts.add(event["context"]["id"])

        def on_script(event):
            data = event.get("executionContextAuxData") or {}
            if data.get("isDefault") or event.get("executionContextId") in tab.seen.default_contexts:
                tab.seen.scripts.append(f"script {event.get('url') or '(inline)'} {event.get('length', 0)} chars")

        async def on_dialog(dialog):
            tab.seen.dialogs.append(f"{dialog.type} {dialog.message[:80]}")
            try:
                await dialog.dismiss()
            except Exception:  # the page may already be gone
                pass

        page.on("request", on_request)
        page.on("dialog", on_dialog)
        page.on("pageerror", lambda error: tab.seen.errors.append(f"pageerror {str(error)[:120]}"))
        page.on("console", lambda message: tab.seen.console.append(f"{message.type} {message.text[:160]}"))
        cdp.on("Runtime.executionContextCreated", on_context)
        cdp.on("Debugger.scriptParsed", on_script)
        await cdp.send("Runtime.enable")
        await cdp.send("Debugger.enable")
        await cdp.send("Page.enable")
        return tab

    async def visit(self, url, settle_ms):
        """Shows `url`, probes it, waits, then leaves it for about:blank; returns what it did."""
        self.seen = Observer()
        self.url = url
        try:
            await self.page.goto(url, wait_until="load", timeout=10_000)
            tree = await self.cdp.send("Page.getFrameTree")
            world = await self.cdp.send(
                "Page.createIsolatedWorld", {"frameId": tree["frameTree"]["frame"]["id"], "worldName": "coffer-probe"}
            )
            await self.cdp.send(
                "Runtime.evaluate", {"expression": PROBE, "contextId": world["executionContextId"], "timeout": 5000}
            )
            await self.page.wait_for_timeout(settle_ms)
        except Exception as error:  # a navigation away or a hang counts against the page
            self.seen.errors.append(f"harness {type(error).__name__}: {str(error)[:120]}")
        seen = self.seen
        try:
            self.seen = Observer()
            await self.page.goto("about:blank", timeout=10_000)
        except Exception:
            pass
        return seen


async def observe_all(context, items, jobs, settle_ms):
    """Observes (name, path) pages in `jobs` tabs; returns (name, Observer) in order."""
    results = [None] * len(items)
    queue = asyncio.Queue()
    for index, item in enumerate(items):
        queue.put_nowait((index, item))

    async def worker():
        tab = await Tab.open(context)
        while not queue.empty():
            index, (name, path) = queue.get_nowait()
            results[index] = (name, await tab.visit(path.as_uri(), settle_ms))
        await tab.page.close()

    await asyncio.gather(*(worker() for _ in range(jobs)))
    return results


async def run(arguments):
    coffer = arguments.coffer or os.environ.get("COFFER_BIN") or str(ROOT / ".build" / "debug" / "coffer")
    if not os.access(coffer, os.X_OK):
        print(f"browser: the coffer binary {coffer} is missing; build it first", file=sys.stderr)
        return 2
    chromium = arguments.chromium or next(
        (path for path in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "") if os.access(path, os.X_OK)),
        None,
    )
    if not chromium:
        print("browser: Chromium is missing (scripts/setup.sh installs it)", file=sys.stderr)
        return 2

    started = time.monotonic()
    vectors, purify_count, leak_count, css_count, trackers = load_vectors()
    named = [host for host in BROWSER_SERVICE_HOSTS for _, payload in vectors if host in payload.lower()]
    if named:
        print(f"browser: a vector names a browser service host ({', '.join(sorted(set(named)))})", file=sys.stderr)
        return 2
    folder = pathlib.Path(tempfile.mkdtemp(prefix="coffer-browser-"))
    passed = failed = 0
    try:
        pages = sanitize_all(coffer, vectors, folder, arguments.jobs)
        allowed = sanitize_all(coffer, [item for item in vectors if item[0] in trackers], folder, 1, trackers)
        # Every page again without its CSP: the sanitizer alone must block what the CSP would.
        bare = [(f"{name} (no CSP)", without_csp(target), 0) for name, target, _ in pages]
        bare += [(f"{name} (--allow-remote, no CSP)", without_csp(target), 0) for name, target, _ in allowed]
        sanitized_at = time.monotonic()
        server = CountingServer()
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=chromium,
                headless=True,
                args=[
                    f"--host-resolver-rules=MAP * 127.0.0.1:{port}",
                    "--disable-background-networking",
                    "--disable-sync",
                    "--disable-component-update",
                    "--disable-domain-reliability",
                    "--no-first-run",
                    "--no-pings",
                ],
            )
            # One context per phase, a few tabs each; a tall viewport so lazy images are in view.
            await asyncio.sleep(0.2)
            server.take()

            # The real run first (nothing from the control can straggle into it): sanitized pages under their CSP.
            context = await browser.new_context(viewport={"width": 1280, "height": 4000})
            results = await observe_all(
                context, [(name, target) for name, target, _ in pages + bare], arguments.jobs, arguments.settle
            )
            await context.close()
            await asyncio.sleep(0.2)
            all_hits = server.take()
            loopback_hits = [hit for hit in all_hits if not is_browser_service(hit)]
            service_hits = len(all_hits) - len(loopback_hits)
            total_blocked = sum(blocked for _, _, blocked in pages)
            total_requests = sum(len(seen.network_requests) for _, seen in results)
            placeholders = sum(len(seen.requests) - len(seen.network_requests) for _, seen in results)
            total_exec = sum(seen.executions for _, seen in results)
            violations = sum(sum("Content Security Policy" in line for line in seen.console) for _, seen in results)
            failures = [(name, seen) for name, seen in results if seen.network_requests or seen.executions]
            if arguments.verbose:
                for name, seen in results:
                    print(f"{'bad ' if (seen.network_requests or seen.executions) else 'ok  '} {name}")
                    for line in seen.requests + seen.console:
                        print(f"     {line}")
            sanitized_run_at = time.monotonic()

            # Control: the harness must see requests and scripts where there are some.
            context = await browser.new_context(viewport={"width": 1280, "height": 4000})
            control = []
            canaries = {
                "remote image without CSP": ('<img src="http://leak.example/canary.png">', "request"),
                "inline script without CSP": ("<script>alert('canary')</script>", "script"),
                "onerror handler without CSP": ("<img src=x onerror=\"console.log('canary')\">", "script"),
                "CSS background without CSP": (
                    "<div style=\"background:url(https://leak.example/bg.png);width:9px;height:9px\"></div>",
                    "request",
                ),
                "inline handler fired by the probe": ("<b onmouseover=\"document.title='ran'\">x</b>", "script"),
            }
            for label, (html, kind) in canaries.items():
                path = folder / f"canary-{len(control)}.html"
                path.write_text(html, encoding="utf-8")
                ((_, seen),) = await observe_all(context, [(label, path)], 1, arguments.settle)
                await asyncio.sleep(0.1)
                hits = [hit for hit in server.take() if not is_browser_service(hit)]
                registered = (len(hits) > 0 and len(seen.requests) > 0) if kind == "request" else seen.executions > 0
                control.append((f"control: {label} registers a {kind}", registered))
            raw = await observe_all(
                context, [(name, folder / f"{name}.html") for name, _ in vectors], arguments.jobs, arguments.raw_settle
            )
            await context.close()
            await asyncio.sleep(0.2)
            raw_requests = sum(not is_browser_service(hit) for hit in server.take())
            raw_request_vectors = sum(1 for _, seen in raw if seen.network_requests)
            raw_exec = sum(seen.executions for _, seen in raw)
            raw_exec_vectors = sum(1 for _, seen in raw if seen.executions)
            raw_css = [name for (name, _), (_, seen) in zip(vectors, raw) if name.startswith("css-")]
            raw_css_requests = [
                name for (name, _), (_, seen) in zip(vectors, raw) if name.startswith("css-") and seen.network_requests
            ]
            if arguments.verbose:
                for name in raw_css:
                    print(f"raw {'requests' if name in raw_css_requests else 'quiet   '} {name}")
            control.append(
                ("control: raw css-substitution vectors without CSP make requests", len(raw_css_requests) > 0)
            )
            control.append(("control: raw vectors without CSP reach the loopback server", raw_requests > 0))
            control.append(("control: raw vectors without CSP run scripts", raw_exec > 0))
            await browser.close()
        finished = time.monotonic()

        for name, seen in failures:
            print(f"FAIL {name}")
            for line in seen.requests + seen.scripts + seen.dialogs + seen.errors:
                print(f"     {line}")
        for line in loopback_hits:
            print(f"FAIL loopback server reached during the sanitized run: {line}")
        for label, ok in control:
            print(f"{'ok  ' if ok else 'FAIL'} {label}")
        print(
            f"control: raw payloads without CSP: {raw_requests} loopback connections, requests from "
            f"{raw_request_vectors} vectors, {raw_exec} script executions in {raw_exec_vectors} vectors"
        )
        print(
            f"control: raw css-substitution vectors without CSP: {len(raw_css_requests)} of {len(raw_css)} "
            f"make requests"
        )
        print(
            f"sanitized: {len(pages)} pages ({purify_count} DOMPurify, {leak_count} HTTP-leak, {css_count} CSS "
            f"substitution) under their CSP and again without it, {len(allowed)} tracking-pixel vectors with "
            f"--allow-remote without it; {total_blocked} remote resources blocked by the sanitizer; "
            f"{total_requests} network requests, "
            f"{len(loopback_hits)} loopback connections, {total_exec} script executions; "
            f"{placeholders} about:invalid placeholders requested ({violations} CSP reports); "
            f"{service_hits} connections of Chromium's own services"
        )
        print(
            f"time: sanitize {sanitized_at - started:.1f} s, sanitized run {sanitized_run_at - sanitized_at:.1f} s, "
            f"control {finished - sanitized_run_at:.1f} s"
        )
        passed = len(pages) + len(bare) - len(failures) + sum(ok for _, ok in control) + (0 if loopback_hits else 1)
        failed = len(failures) + sum(not ok for _, ok in control) + (1 if loopback_hits else 0)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"browser: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coffer", help="the coffer binary (default: $COFFER_BIN or .build/debug/coffer)")
    parser.add_argument("--chromium", help="the Chromium binary (default: Debian's)")
    parser.add_argument("--jobs", type=int, default=4, help="pages rendered at once")
    parser.add_argument("--settle", type=int, default=150, help="milliseconds to wait after load and probing")
    parser.add_argument("--raw-settle", type=int, default=100, help="the same for the control's raw pages")
    parser.add_argument("--verbose", action="store_true", help="list passing vectors too")
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
