"""A page checked in a real headless browser: Debian's Chromium, driven over its DevTools protocol on a pipe
(`--remote-debugging-pipe`: JSON messages ending in NUL on file descriptors 3 and 4; no library, no port).

    errors = check_in_browser("eval/reproduction.html", "/tmp/page.png")   # [] when the page is clean

It loads the page, clicks its first copy button, takes a full-page screenshot, and returns every console error,
uncaught exception and failed load (Runtime.consoleAPICalled of type error/assert, Runtime.exceptionThrown,
Log.entryAdded of level error) -- and an error when the page's script did not finish (body data-ready).
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from pipeline.data.files import atomic_write
from pipeline.errors import MissingResourceError

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT = 60.0


def find_browser() -> str:
    for name in BROWSERS:
        if shutil.which(name):
            return shutil.which(name)
    raise MissingResourceError("no headless browser found (chromium, chromium-browser, google-chrome): "
                               "apt-get install chromium")


def _as_fds_3_and_4(reading: int, writing: int) -> None:
    """In the child: the pipe ends as the descriptors Chromium talks on (3 in, 4 out), and inheritable (os.dup2's
    default); every other descriptor of this process is not (Python's), so close_fds=False leaks nothing else."""
    reading, writing = os.dup(reading), os.dup(writing)  # out of the way of 3 and 4 first
    os.dup2(reading, 3)
    os.dup2(writing, 4)


class _DevTools:
    def __init__(self, browser: str, profile: str):
        to_browser_read, self._write = os.pipe()
        self._read, from_browser_write = os.pipe()
        self.process = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False,
            preexec_fn=lambda: _as_fds_3_and_4(to_browser_read, from_browser_write))
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer, self._next, self.events = b"", 0, []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, deadline: float) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._receive(deadline))

    def _receive(self, deadline: float | None = None) -> dict:
        deadline = deadline or time.monotonic() + TIMEOUT
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("the browser did not answer in time")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def close(self) -> None:
        try:
            os.write(self._write, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._write)
            os.close(self._read)


def check_in_browser(page: str | Path, screenshot: str | Path, width: int = 1600) -> list[str]:
    """Load `page` in headless Chromium; write its full-page screenshot (PNG) and return the errors it logged."""
    url = Path(page).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="irpipe-browser-") as profile:
        tools = _DevTools(find_browser(), profile)
        try:
            target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                tools.send(f"{domain}.enable", session=session)
            tools.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                              "mobile": False}, session=session)
            tools.send("Page.navigate", {"url": url}, session=session)
            tools.wait_for("Page.loadEventFired", time.monotonic() + TIMEOUT)
            ready = tools.send("Runtime.evaluate", {"expression": "document.body.getAttribute('data-ready')",
                                                    "returnByValue": True}, session=session)
            tools.send("Runtime.evaluate", {"expression": "var b = document.querySelector('button.copy'); "
                                                          "if (b) b.click();", "awaitPromise": False}, session=session)
            height = tools.send("Page.getLayoutMetrics", session=session)["cssContentSize"]["height"]
            tools.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": int(min(height, 16000)),
                                                              "deviceScaleFactor": 1, "mobile": False}, session=session)
            time.sleep(0.3)  # the copy button's handler, and layout at the new size
            shot = tools.send("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
            tools.send("Runtime.evaluate", {"expression": "1"}, session=session)  # drain events sent meanwhile
        finally:
            tools.close()
    with atomic_write(screenshot, "wb") as out:
        out.write(base64.b64decode(shot))
    errors = _errors(tools.events)
    if (ready.get("result") or {}).get("value") != "yes":
        errors.append("the page's script did not finish (body data-ready is not 'yes')")
    return errors


def _errors(events: list[dict]) -> list[str]:
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append("console." + params["type"] + ": " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            found.append("uncaught: " + str((details.get("exception") or {}).get("description") or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            found.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
    return found
