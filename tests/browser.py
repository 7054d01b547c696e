"""A headless Chromium driven over the DevTools protocol (websockets), for UI tests.

Debian's ``chromium`` package only (``apt-get install chromium``); nothing is downloaded by the test.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any


def binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    def __init__(self, profile: Path, port: int, width: int = 1400, height: int = 900):
        from websockets.sync.client import connect

        self.proc = subprocess.Popen(
            [binary(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--remote-debugging-port={port}", f"--user-data-dir={profile}", f"--window-size={width},{height}",
             "--no-first-run", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline, page = time.monotonic() + 60, None
        while page is None:
            try:
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2))
                page = next((t for t in targets if t.get("type") == "page"), None)
            except OSError:
                pass
            if page is None:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise AssertionError(f"chromium's DevTools did not answer on port {port} within 60 s")
                time.sleep(0.3)
        self._connection = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=20)
        self.ws = self._connection.__enter__()
        self.next_id = 0
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def send(self, method: str, timeout: float = 60, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def open(self, url: str, ready: str, timeout: float = 60) -> None:
        """Navigate and wait until the JS expression ``ready`` is truthy."""
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not self.evaluate(ready):
            if time.monotonic() > deadline:
                body = self.evaluate("document.body ? document.body.innerText.slice(0, 2000) : ''")
                raise AssertionError(f"{url}: {ready!r} never became true within {timeout:.0f} s; page text: {body!r}")
            time.sleep(0.3)

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))
        return path

    def close(self) -> None:
        import os
        import signal

        if getattr(self, "_connection", None) is not None:
            self._connection.__exit__(None, None, None)
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
