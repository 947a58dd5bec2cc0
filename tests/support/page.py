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
