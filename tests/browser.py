"""A real browser for the page tests: Debian's headless chromium, driven over the Chrome
DevTools Protocol (a websocket, `websocket-client`).

    with Browser() as browser:
        view = browser.open(path, width=390)      # loads the file at that viewport width
        view.evaluate("document.title")
        view.screenshot(png_path)
        view.requests                              # every URL the page asked for

The page under test carries no hook of its own: everything is read from outside, through
the DOM, layout and the network log the protocol exposes.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

WIDTHS = (390, 1200)  # a phone, a desktop (CSS pixels)
PRINT_WIDTH = 703  # an A4 page (210 mm) less 1.2 cm margins each side, in CSS pixels
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="envbuild-chromium-")
        self._process: subprocess.Popen | None = None
        self._ws = None
        self._next_id = 0
        self._events: list[dict] = []

    # --- lifetime ----------------------------------------------------------------------------
    def __enter__(self) -> Browser:
        import websocket

        if CHROMIUM is None:
            raise BrowserError("chromium is not installed (apt-get install chromium)")
        profile = self._profile.name
        self._process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync", "--hide-scrollbars",
             "--font-render-hinting=none", "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise BrowserError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout) as answer:
            pages = [p for p in json.load(answer) if p.get("type") == "page"]
        self._ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=self.timeout,
                                               suppress_origin=True)
        self.call("Page.enable")
        self.call("Network.enable")
        self.call("Runtime.enable")
        return self

    def __exit__(self, *exc) -> None:
        if self._ws is not None:
            self._ws.close()
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._profile.cleanup()

    # --- protocol -------------------------------------------------------------------------------
    def call(self, method: str, **params) -> dict:
        self._next_id += 1
        ident = self._next_id
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)

    def _wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for i, event in enumerate(self._events):
            if event.get("method") == method:
                return self._events.pop(i)
        while time.monotonic() < deadline:
            message = json.loads(self._ws.recv())
            if message.get("method") == method:
                return message
            self._events.append(message)
        raise BrowserError(f"no {method} within {self.timeout} s")

    # --- what the tests use ---------------------------------------------------------------------
    def open(self, path: str | os.PathLike, *, width: int, height: int = 900, media: str = "screen") -> View:
        """Load the file at a viewport `width` CSS pixels wide (a phone below 600)."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=width < 600)
        self.call("Emulation.setEmulatedMedia", media=media)
        self._events.clear()
        url = Path(path).resolve().as_uri()
        self.call("Page.navigate", url=url)
        self._wait_for("Page.loadEventFired")
        requests = [e["params"]["request"]["url"] for e in self._events if e.get("method") == "Network.requestWillBeSent"]
        return View(self, url, requests)


class View:
    """One loaded page."""

    def __init__(self, browser: Browser, url: str, requests: list[str]):
        self.browser, self.url = browser, url
        self.requests = requests  # every URL the page asked for, its own first

    def evaluate(self, expression: str):
        result = self.browser.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def overflow(self) -> dict:
        """How far the page is wider than the viewport, and the elements that stick out."""
        return self.evaluate("""(() => {
            const width = document.documentElement.clientWidth;
            const out = [];
            for (const el of document.body.querySelectorAll('*')) {
                if (el.closest('.scroll') && !el.classList.contains('scroll')) continue;  // scrolls in its box
                const r = el.getBoundingClientRect();
                if (r.width && r.right > width + 1) out.push(el.tagName + '.' + el.className + ' ' + Math.round(r.right));
            }
            return {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
                    clientWidth: width, outside: out.slice(0, 10)};
        })()""")

    def screenshot(self, path: str | os.PathLike, *, top: int = 0, height: int | None = None) -> None:
        """A PNG of the page from `top`, `height` CSS pixels tall (default: to its end)."""
        width, full = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        height = min(height or full, full - top, 8000)
        data = self.browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                                 clip={"x": 0, "y": top, "width": width, "height": height, "scale": 1})["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def pdf(self) -> bytes:
        return base64.b64decode(self.browser.call("Page.printToPDF", printBackground=True)["data"])


def look_at(browser: Browser, page: Path, shots: Path | None = None) -> View:
    """Load the page at a phone's and a desktop's width and on paper: nothing fetched,
    nothing executable, nothing wider than the viewport (a wide table scrolls in its own
    box on screen and fits on paper), a PDF printed. Returns the desktop view. `shots`:
    a folder for screenshots to look at."""
    for width in WIDTHS:
        view = browser.open(page, width=width)
        assert view.requests == [view.url], f"the page fetched {view.requests[1:]}"
        assert view.evaluate("document.querySelectorAll('script, iframe, object, embed, img, link').length") == 0
        overflow = view.overflow()
        assert overflow["scrollWidth"] <= overflow["innerWidth"] and not overflow["outside"], (width, overflow)
        if shots is not None:
            view.screenshot(shots / f"{page.stem}-{width}.png", height=2000)
    paper = browser.open(page, width=PRINT_WIDTH, media="print")
    overflow = paper.overflow()
    assert overflow["scrollWidth"] <= overflow["innerWidth"], ("print", overflow)
    assert paper.pdf().startswith(b"%PDF")
    return browser.open(page, width=1200)
