"""Driving the page in headless Chromium: where Chromium is, how it is started, and the steps page tests share."""

from __future__ import annotations

import base64
import io
import os
import time
from pathlib import Path

import numpy as np
from PIL import Image

from support.service import REPO, Server, fast_style

CHROMIUM = Path(os.environ.get("ANIPAINT_CHROMIUM", "/usr/bin/chromium"))
SHOTS = REPO / "artifacts" / "screenshots"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def shot(page, name: str, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def open_page(page, server: Server) -> None:
    # Waits go through selectors: wait_for_function evaluates a string, which the page's CSP rightly forbids.
    page.goto(server.url + "/")
    page.wait_for_selector(f'[data-testid="style-{fast_style()}"]')
    page.wait_for_selector("#server-status[data-state='ready']", state="attached")


def wait_thumbnails(page, timeout: float = 90.0) -> None:
    """Let the painted thumbnails arrive (they are made one at a time on first request)."""
    deadline = time.monotonic() + timeout
    while page.locator(".style-card .thumb.pending").count() and time.monotonic() < deadline:
        page.wait_for_timeout(500)


def canvas_pixels(page) -> np.ndarray:
    url = page.evaluate("document.getElementById('after').toDataURL('image/png')")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))


def set_strength(page, value: int) -> None:
    page.locator('[data-testid="strength"]').fill(str(value))
    page.wait_for_selector(f"#compare[data-strength='{value}']", state="attached")


# axe-core, from package.json's devDependencies (`make setup-test` installs it): never fetched from elsewhere.
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
# axe's rules that a person would notice most: WCAG A and AA and the best practices (a level-one heading among them).
AXE_RUN = """async () => {
  const found = await axe.run(document, { resultTypes: ["violations"] });
  return found.violations.map((v) => ({ id: v.id, impact: v.impact,
                                        nodes: v.nodes.map((n) => n.target.join(" ")) }));
}"""


def axe_violations(page, impacts: tuple[str, ...] = ("serious", "critical")) -> list[dict]:
    """What axe-core finds wrong on the page as it is now, of the given impacts. The script goes in over the
    DevTools protocol, as the page's Content-Security-Policy (rightly) runs no script it did not serve."""
    assert AXE.exists(), f"no {AXE}: `make setup-test` installs axe-core from the npm registry"
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    return [v for v in page.evaluate(AXE_RUN) if v["impact"] in impacts]


def tab_stops(page, limit: int = 80) -> list[str]:
    """The test ids (else ids) the Tab key reaches from the top of the page, in order, once round."""
    page.evaluate("document.activeElement && document.activeElement.blur()")
    seen: list[str] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = page.evaluate("(() => { const e = document.activeElement;"
                            " return e ? (e.dataset.testid || e.id || e.tagName) : ''; })()")
        if seen and now == seen[0]:
            break
        seen.append(now)
    return seen
