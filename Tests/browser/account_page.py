#!/usr/bin/env python3
"""coffer-notify's /account page in headless Chromium: sign in, see the sessions, revoke one.

Run by `AccountBrowserTests` (CofferNotifyTests), which starts the service on a loopback port with sessions for
the user (one named `phone`, one with a hostile device name) and another user's session, then checks the database
after this script: the `phone` session is revoked and no other.

Per page the harness records every dialog, page error and console message (Chromium reports each Content Security
Policy violation on the console) and the source of every script compiled in the page's main world (DevTools
`Debugger.scriptParsed`): the page has no script of its own, and Playwright's helpers are told apart by source, so
a compiled script holding the hostile name's `alert(` is an injection. A control page first proves the harness sees
a script run and a CSP violation.

Pass: sign-in works, the hostile device name is shown as text, the revoked row says "revoked", nothing ran and no
CSP violation was reported. Prints `account page: passed` or what failed, and exits non-zero on any failure.

Usage: account_page.py --url http://127.0.0.1:PORT --user NAME --password PASSWORD --hostile NAME [--chromium PATH]
"""

import argparse
import asyncio
import os
import shutil
import sys

from playwright.async_api import async_playwright


class Seen:
    def __init__(self):
        self.dialogs, self.errors, self.console, self.scripts, self.default_contexts = [], [], [], [], set()
        self.script_ids = []

    async def read_scripts(self, cdp):
        """Keeps the main-world scripts whose source calls alert (Playwright's own helpers do not)."""
        for script_id in self.script_ids:
            try:
                source = (await cdp.send("Debugger.getScriptSource", {"scriptId": script_id}))["scriptSource"]
            except Exception:  # a script of a page already left
                continue
            if "alert(" in source:
                self.scripts.append(f"script {source[:80]!r}")

    def problems(self):
        return self.dialogs + self.errors + self.console + self.scripts


async def open_tab(context, seen):
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)

    def on_context(event):
        if event["context"].get("auxData", {}).get("isDefault"):
            seen.default_contexts.add(event["context"]["id"])

    def on_script(event):
        data = event.get("executionContextAuxData") or {}
        if data.get("isDefault") or event.get("executionContextId") in seen.default_contexts:
            seen.script_ids.append(event["scriptId"])

    async def on_dialog(dialog):
        seen.dialogs.append(f"dialog {dialog.type} {dialog.message[:80]}")
        try:
            await dialog.dismiss()
        except Exception:  # the page may already be gone
            pass

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda error: seen.errors.append(f"pageerror {str(error)[:120]}"))
    page.on("console", lambda message: seen.console.append(f"console {message.type} {message.text[:200]}"))
    cdp.on("Runtime.executionContextCreated", on_context)
    cdp.on("Debugger.scriptParsed", on_script)
    await cdp.send("Runtime.enable")
    await cdp.send("Debugger.enable")
    return page, cdp


async def main(arguments):
    failures = []
    chromium = arguments.chromium or next(
        (path for path in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "") if os.access(path, os.X_OK)),
        None,
    )
    if not chromium:
        print("account page: no Chromium (scripts/setup.sh installs it)", file=sys.stderr)
        return 2
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, headless=True)
        try:
            # Control: the harness must see a script run and a CSP violation on a page made to have them.
            control = Seen()
            context = await browser.new_context()
            page, cdp = await open_tab(context, control)
            await page.goto(f"{arguments.url}/v1/health")
            await page.set_content(
                "<meta http-equiv='Content-Security-Policy' content=\"style-src 'none'\">"
                "<style>b{}</style><script>alert('control')</script>"
            )
            await page.wait_for_timeout(300)
            await control.read_scripts(cdp)
            if not control.dialogs or not control.scripts:
                failures.append(f"control: the harness saw no script run ({control.problems()})")
            if not any("Content Security Policy" in line for line in control.console):
                failures.append(f"control: the harness saw no CSP violation ({control.console})")
            await context.close()

            seen = Seen()
            context = await browser.new_context()
            page, cdp = await open_tab(context, seen)
            await page.goto(f"{arguments.url}/account", wait_until="load")
            await page.fill("input[name=user]", arguments.user)
            await page.fill("input[name=password]", arguments.password)
            await page.click("button[type=submit]")
            await page.wait_for_selector("#sessions", timeout=10_000)
            devices = [text.strip() for text in await page.locator("td.device").all_text_contents()]
            if sorted(devices) != sorted(["phone", arguments.hostile]):
                failures.append(f"the list shows {devices!r}, not phone and the hostile name as text")
            cookies = {cookie["name"]: cookie for cookie in await context.cookies()}
            account = cookies.get("coffer_account")
            if not account or not account["secure"] or not account["httpOnly"] or account["sameSite"] != "Strict":
                failures.append(f"the session cookie is not Secure, HttpOnly and SameSite=Strict: {account}")
            row = page.locator("tr", has=page.locator("td.device", has_text="phone")).filter(
                has_not_text=arguments.hostile
            )
            async with page.expect_navigation():
                await row.locator("button", has_text="Revoke").click()
            await page.wait_for_selector("#sessions")
            state = (await row.locator("td.state").text_content() or "").strip()
            if state != "revoked":
                failures.append(f"the revoked row says {state!r}")
            if await row.locator("button", has_text="Revoke").count() != 0:
                failures.append("the revoked row still has a Revoke button")
            # The hostile row's forms still work; nothing of its name became markup.
            if await page.locator("img").count() or await page.locator("body script").count():
                failures.append("the hostile device name became markup")
            await page.wait_for_timeout(300)
            await seen.read_scripts(cdp)
            if seen.problems():
                failures.append(f"the page ran a script or broke its policy: {seen.problems()}")
            await context.close()
        finally:
            await browser.close()
    for failure in failures:
        print(f"account page: FAIL {failure}")
    print("account page: passed" if not failures else f"account page: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--hostile", required=True, help="the device name that must show as text")
    parser.add_argument("--chromium", help="the Chromium binary (default: Debian's)")
    sys.exit(asyncio.run(main(parser.parse_args())))
