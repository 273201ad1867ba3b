"""Headless Chromium, driven by Playwright: the dashboard's browser test and its screenshot.

Playwright is a development dependency; it drives Debian's Chromium (``/usr/bin/chromium``,
or ``FEEDBACK_SYNC_CHROMIUM``), which ``./run test`` and ``./run screenshot`` install when
missing. The flags keep a root, headless, offline Chromium quiet: no sandbox (root), no GPU,
and none of the background connections a closed network refuses.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    return os.environ.get("FEEDBACK_SYNC_CHROMIUM", "/usr/bin/chromium")


@dataclass
class Visit:
    """A page opened in Chromium, and what it did while loading."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@contextmanager
def open_page(path: Path | str, width: int = 900, height: int = 900) -> Iterator[Visit]:
    """Opens the local file ``path`` (or a URL); records console errors, page errors and
    requests."""
    from playwright.sync_api import sync_playwright

    browser_path = chromium_path()
    if not Path(browser_path).exists():
        raise RuntimeError(
            f"Chromium not found at {browser_path}: run through ./run (it installs Debian's "
            "chromium) or set FEEDBACK_SYNC_CHROMIUM"
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            visit = Visit(page)
            page.on(
                "console",
                lambda m: visit.console_errors.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda e: visit.console_errors.append(str(e)))
            page.on("request", lambda r: visit.requests.append(r.url))
            url = path.resolve().as_uri() if isinstance(path, Path) else path
            page.goto(url, wait_until="load")
            yield visit
        finally:
            browser.close()


def screenshot(html: Path, png: Path) -> None:
    """A full-page PNG of ``html``, in a window as wide as a laptop's screen."""
    with open_page(html, width=1400) as visit:
        png.parent.mkdir(parents=True, exist_ok=True)
        visit.page.screenshot(path=str(png), full_page=True)


def main(argv: list[str]) -> int:
    """``./run screenshot [HTML] [PNG]``: defaults to the demo's dashboard,
    data/demo-report.html -> docs/images/report.png."""
    html = Path(argv[0]) if argv else Path("data/demo-report.html")
    png = Path(argv[1]) if len(argv) > 1 else Path("docs/images/report.png")
    if not html.exists():
        print(f"screenshot: {html} does not exist: run ./run demo first", file=sys.stderr)
        return 2
    screenshot(html, png)
    print(f"screenshot: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
