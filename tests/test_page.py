"""The page in a real headless Chromium against a real server: choose, paint, compare, download, busy."""

from __future__ import annotations

import io
import os
import re
import time
from pathlib import Path

import pytest
from PIL import Image

from conftest_service import GROUP_PHOTO, REPO, Server, fast_style, photo_bytes, resized_photo, running_server

CHROMIUM = Path(os.environ.get("ANIPAINT_CHROMIUM", "/usr/bin/chromium"))
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (set ANIPAINT_CHROMIUM)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

SHOTS = REPO / "artifacts" / "screenshots"
BUSY_EN = "The painter is busy — please try again in a moment"
BUSY_ZH = "系统繁忙，请稍后再试"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(prepared_store: Path, tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("page")) as s:
        yield s


@pytest.fixture(scope="module")
def busy_server(prepared_store: Path, tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("page"), queue_size=1, jobs=1) as s:
        yield s


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page_factory(browser):
    """New pages in fresh contexts; any uncaught script error on them fails the test."""
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
        return page

    yield make
    for ctx in contexts:
        ctx.close()
    assert not errors, errors


def _shot(page, name: str, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def _open(page, server: Server) -> None:
    page.goto(server.url + "/")
    page.wait_for_selector(f'[data-testid="style-{fast_style()}"]')
    page.wait_for_function("document.getElementById('server-status').dataset.state === 'ready'")


def _wait_thumbnails(page, timeout: float = 90.0) -> None:
    """Let the painted thumbnails arrive (they are made one at a time on first request)."""
    deadline = time.monotonic() + timeout
    while page.locator(".style-card:not(.unavailable) .thumb.pending").count() and time.monotonic() < deadline:
        page.wait_for_timeout(500)


def test_paint_compare_download(server: Server, page_factory) -> None:
    page = page_factory()
    _open(page, server)
    assert page.locator("#paint").is_disabled()
    unavailable = page.locator(".style-card.unavailable")
    for i in range(unavailable.count()):
        card = unavailable.nth(i)
        assert card.locator("input").is_disabled()
        assert "Not available" in card.inner_text()
    _wait_thumbnails(page)
    _shot(page, "page-idle")

    page.set_input_files('[data-testid="file-input"]', str(GROUP_PHOTO))
    page.wait_for_selector('[data-testid="preview"]:visible')
    page.click(f'[data-testid="style-{fast_style()}"]')
    assert "selected" in page.get_attribute(f'[data-testid="style-{fast_style()}"]', "class")
    assert page.is_checked('[data-testid="faces"]')  # face enhancement is on by default
    page.click('[data-testid="size-512"]')
    page.click('[data-testid="paint"]')
    page.wait_for_selector('[data-testid="progress"]:visible')
    page.wait_for_function("document.body.dataset.state === 'done'", timeout=120_000)
    assert page.locator('[data-testid="message"]').is_hidden()
    page.evaluate("window.scrollTo(0, 0)")
    _shot(page, "page-result")

    before = page.locator('[data-testid="before-image"]')
    clip_at_start = before.evaluate("el => el.style.clipPath")
    assert clip_at_start == "inset(0px 50% 0px 0px)" or "50" in clip_at_start
    box = page.locator('[data-testid="compare"]').bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.2, box["y"] + box["height"] * 0.5)
    clip_after = before.evaluate("el => el.style.clipPath")
    assert clip_after != clip_at_start
    split = float(page.get_attribute('[data-testid="compare"]', "data-split"))
    assert 10 <= split <= 30, split
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.5)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] * 0.5, steps=8)
    page.mouse.up()
    assert float(page.get_attribute('[data-testid="compare"]', "data-split")) > 60  # dragged
    _shot(page, "page-compare", full_page=False)

    with page.expect_download() as info:
        page.click('[data-testid="download"]')
    download = info.value
    assert download.suggested_filename == f"group_pakutaso-anipaint-{fast_style()}.png"
    data = Path(download.path()).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(io.BytesIO(data)).size == (512, 512)
    assert re.search(r"512×512", page.inner_text('[data-testid="result-info"]'))


def test_friendly_errors(server: Server, page_factory) -> None:
    page = page_factory()
    _open(page, server)
    page.set_input_files(
        '[data-testid="file-input"]',
        files=[{"name": "notes.jpg", "mimeType": "image/jpeg", "buffer": b"not a photo" * 50}],
    )
    page.click('[data-testid="paint"]')
    message = page.locator('[data-testid="message"]')
    message.wait_for(state="visible")
    assert "not a picture we can read" in message.inner_text()

    big = 21 * 1024 * 1024  # over the 20 MB default: refused before uploading
    page.set_input_files(
        '[data-testid="file-input"]', files=[{"name": "huge.jpg", "mimeType": "image/jpeg", "buffer": b"\0" * big}]
    )
    page.wait_for_function("document.querySelector('[data-testid=message-text]').textContent.includes('too big')")
    assert "20 MB" in page.inner_text('[data-testid="message"]')


def test_busy_message(busy_server: Server, page_factory) -> None:
    slow = resized_photo(1800, quality=90)
    accepted = [busy_server.submit(slow, max_side="0", faces="false") for _ in range(2)]
    assert [r.status_code for r in accepted] == [202, 202]
    try:
        # No screenshot in Chinese: test machines often lack CJK fonts, which would only show boxes.
        for locale, text, shot in (("en-GB", BUSY_EN, "page-busy"), ("zh-CN", BUSY_ZH, None)):
            page = page_factory(locale=locale)
            _open(page, busy_server)
            page.set_input_files('[data-testid="file-input"]', str(GROUP_PHOTO))
            page.click('[data-testid="paint"]')
            message = page.locator('[data-testid="message"]')
            message.wait_for(state="visible")
            assert message.get_attribute("data-kind") == "busy"
            assert text in message.inner_text()
            if locale.startswith("zh"):
                assert "开始绘制" in page.inner_text('[data-testid="paint"]')
            if shot:
                page.evaluate("window.scrollTo(0, 0)")
                _shot(page, shot)
    finally:
        for res in accepted:
            assert busy_server.wait_job(res.json()["id"], timeout=240)["status"] == "done"


def test_phone_layout(server: Server, page_factory) -> None:
    page = page_factory(width=390, height=844, mobile=True)
    _open(page, server)
    _wait_thumbnails(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing sticks out sideways
    _shot(page, "page-phone")
    page.set_input_files(
        '[data-testid="file-input"]', files=[{"name": "group.jpg", "mimeType": "image/jpeg", "buffer": photo_bytes()}]
    )
    page.click('[data-testid="paint"]')
    page.wait_for_function("document.body.dataset.state === 'done'", timeout=120_000)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    _shot(page, "page-phone-result")


def test_api_docs_render_offline(server: Server, page_factory) -> None:
    """/docs must work without a network: Swagger UI is served from the app, not a CDN."""
    page = page_factory()
    external: list[str] = []
    page.on("request", lambda req: external.append(req.url) if not req.url.startswith(server.url) else None)
    page.goto(server.url + "/docs")
    page.wait_for_selector(".opblock")
    assert page.locator(".opblock").count() >= 8
    assert "/predict" in page.inner_text(".swagger-ui")
    assert external == []
    _shot(page, "api-docs", full_page=False)
