"""The page tests' fixtures: one headless Chromium per module, fresh pages that fail on any script error, and a
served app per module (a module may define its own ``server``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.page import ARGS, CHROMIUM
from support.service import running_server


@pytest.fixture(scope="module")
def server(prepared_store: Path, tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("page")) as s:
        yield s


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (set ANIPAINT_CHROMIUM)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page_factory(browser):
    """New pages in fresh contexts; any uncaught script error or blocked resource on them fails the test."""
    contexts = []
    errors: list[str] = []

    def make(locale: str = "en-US", width: int = 1280, height: int = 900, mobile: bool = False):
        ctx = browser.new_context(
            locale=locale,
            viewport={"width": width, "height": height},
            accept_downloads=True,
            device_scale_factor=2 if mobile else 1,
            is_mobile=mobile,
            has_touch=mobile,
        )
        contexts.append(ctx)
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(  # the server's Content-Security-Policy must not block anything the page does
            "console", lambda msg: errors.append(msg.text) if "Content Security Policy" in msg.text else None
        )
        return page

    yield make
    for ctx in contexts:
        ctx.close()
    assert not errors, errors
