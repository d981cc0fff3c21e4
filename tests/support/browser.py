"""Open a page in headless Chromium as a person would, over the DevTools protocol on a pipe (stdlib only).

``render(path, screenshot)`` loads a local file with the network off, collects every console error, uncaught
exception and browser log error, measures the page's SVG plots as laid out (so "present" means drawn with a
size, not merely in the markup) and saves a PNG screenshot of the whole page. Chromium is the Debian package
that ``scripts/bootstrap`` installs; a missing browser is an error, never a skip.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MEASURE = """(() => {
  const plots = [...document.querySelectorAll('.plot svg')].map(svg => {
    const box = svg.getBoundingClientRect();
    return {cls: svg.parentElement.className, width: box.width, height: box.height,
            paths: svg.querySelectorAll('path, polyline, line').length};
  });
  return JSON.stringify({title: document.title, plots: plots, height: document.documentElement.scrollHeight,
                         rows: document.querySelectorAll('table.steps tbody tr').length,
                         external: [...document.querySelectorAll('[src], link[href]')].length});
})()"""


@dataclass
class Rendered:
    title: str
    plots: list[dict[str, Any]]
    rows: int
    external: int
    errors: list[str] = field(default_factory=list)


class Browser:
    """Headless Chromium driven over --remote-debugging-pipe: commands on its fd 3, replies on its fd 4, each a
    JSON message ended by a NUL byte."""

    def __init__(self, binary: str) -> None:
        commands_read, self._commands = os.pipe()
        replies_read, replies_write = os.pipe()
        self._profile = tempfile.mkdtemp(prefix="csibench-chromium-")

        def wire() -> None:  # in the child, before exec: the protocol's fixed descriptors (copied out of the
            commands, replies = os.dup(commands_read), os.dup(replies_write)  # way first: either may be 3 or 4)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        # The proxy points nowhere: the page must need no network, and a request would show as an error.
        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             f"--user-data-dir={self._profile}", "--proxy-server=http://127.0.0.1:9", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=wire)  # subprocess closes other descriptors after preexec_fn
        os.close(commands_read)
        os.close(replies_write)
        self._replies = os.fdopen(replies_read, "rb", buffering=0)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self.send("Browser.close")
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        self._replies.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = self._replies.read(1 << 20)
            if not chunk:
                raise OSError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        command: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            command["sessionId"] = session
        os.write(self._commands, json.dumps(command).encode() + b"\0")
        while True:
            message = self._message()
            if message.get("id") == self._next:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, method: str, session: str) -> None:
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            self.events.append(self._message())


def chromium() -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        raise RuntimeError("chromium is not installed: scripts/bootstrap installs it (apt-get install -y chromium); "
                           "the HTML report's browser test needs it and never skips")
    return binary


def render(page: Path, screenshot: Path, width: int = 1280) -> Rendered:
    """Load ``page`` in headless Chromium; what a person would see, and what went wrong on the way."""
    with Browser(chromium()) as browser:
        target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(f"{domain}.enable", session)
        browser.send("Emulation.setDeviceMetricsOverride", session, width=width, height=900, deviceScaleFactor=1,
                     mobile=False)
        browser.send("Page.navigate", session, url=page.resolve().as_uri())
        browser.wait_for("Page.loadEventFired", session)
        measured = json.loads(browser.send("Runtime.evaluate", session, expression=MEASURE,
                                           returnByValue=True)["result"]["value"])
        shot = browser.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                            clip={"x": 0, "y": 0, "width": width, "height": measured["height"], "scale": 1})
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        errors = []
        for event in browser.events:
            params = event.get("params") or {}
            if event.get("method") == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in
                                                      params.get("args") or []))
            elif event.get("method") == "Runtime.exceptionThrown":
                errors.append("exception: " + str((params.get("exceptionDetails") or {}).get("text")))
            elif event.get("method") == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
                errors.append("log: " + str(params["entry"].get("text")))
        return Rendered(measured["title"], measured["plots"], measured["rows"], measured["external"], errors)


def assert_run_page_drawn(seen: Rendered, title: str, steps: int) -> None:
    """A run's HTML report as the browser drew it: no error, its title, a row per step and the total, a latency
    distribution and a timeline per step with lines in each, nothing fetched from outside the page."""
    assert seen.errors == []
    assert seen.title == title and seen.rows == steps + 1, (seen.title, seen.rows)
    assert len(seen.plots) == 2 * steps and seen.external == 0, seen
    for plot in seen.plots:
        assert plot["width"] > 200 and plot["height"] > 100 and plot["paths"] > 10, plot
