"""Headless Chromium driven over the Chrome DevTools Protocol, with the standard library
only: the browser reads commands from fd 3 and writes replies to fd 4
(``--remote-debugging-pipe``), each a JSON message ended by a NUL byte."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: Names Chromium is installed under (Debian's ``chromium``, others').
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM = next(filter(None, map(shutil.which, BROWSERS)), None)
#: Runs the browser with the pipes' ends given as its fds 3 and 4 (a shell's ``3<&N`` takes
#: one digit in dash).
_AT_3_AND_4 = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
               "os.execv(sys.argv[3], sys.argv[3:])")


class Browser:
    """One headless Chromium with one page; ``call`` sends a command to the page."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 1000, timeout: float = 30.0):
        if CHROMIUM is None:
            raise RuntimeError(f"no Chromium on PATH ({', '.join(BROWSERS)})")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # the child's ends moved past 4, so that setting its fds 3 and 4 clobbers neither
        for fd in (to_browser_r, from_browser_w):
            high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
            os.close(fd)
            to_browser_r, from_browser_w = (high, from_browser_w) if fd == to_browser_r else (to_browser_r, high)
        # --no-sandbox: as root Chromium will not start sandboxed; the rest keep it off the
        # network (a closed one makes it hang or crawl) and in a fresh profile
        flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--remote-debugging-pipe", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic", f"--user-data-dir={profile}",
                 f"--window-size={width},{height}", "about:blank"]
        self.process = subprocess.Popen(
            [sys.executable, "-c", _AT_3_AND_4, str(to_browser_r), str(from_browser_w), CHROMIUM, *flags],
            pass_fds=(to_browser_r, from_browser_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.timeout, self.events, self._next, self._buffer = timeout, [], 0, b""
        page = next(t for t in self._send("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self._send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._send(method, params, self.session)

    def open(self, url: str) -> None:
        """Load ``url`` and wait for its load event."""
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression!r} threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wheel(self, x: float, y: float, delta_y: float, ctrl: bool = False) -> None:
        """A real mouse wheel turn at (x, y) of the viewport, Ctrl held or not."""
        self.call("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": delta_y,
                                               "modifiers": 2 if ctrl else 0})

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        Path(path).write_bytes(base64.b64decode(self.call("Page.captureScreenshot", params)["data"]))

    def errors(self) -> list[str]:
        """What the page reported as an error: console errors, uncaught exceptions, log errors."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(str(p["exceptionDetails"]))
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") == "error":
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(p["entry"]["text"])
        return out

    def wait_for(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for e in self.events:
                if e["method"] == method:
                    return e
            self._read(deadline)

    def close(self) -> None:
        try:
            self._send("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            for reply in self._read(deadline):
                if reply.get("id") == self._next:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]

    def _read(self, deadline: float) -> list[dict[str, Any]]:
        """The replies of one read from the browser; events are kept in ``events``."""
        import select

        if not select.select([self._from_browser], [], [], max(deadline - time.monotonic(), 0))[0]:
            raise RuntimeError("Chromium did not answer in time")
        chunk = os.read(self._from_browser, 1 << 20)
        if not chunk:
            raise RuntimeError("Chromium closed the pipe")
        self._buffer += chunk
        *messages, self._buffer = self._buffer.split(b"\0")
        replies = []
        for raw in messages:
            message = json.loads(raw)
            (replies if "id" in message else self.events).append(message)
        return replies
