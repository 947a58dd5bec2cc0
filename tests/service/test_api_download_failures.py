"""A server that cannot download a style's files (a company firewall, a mirror that is down), over HTTP: a failed
download is 503 with Retry-After (or 400 when the origin says the file is not there), the style's state says so
and when the next try is, a later request tries again, and a download that hangs delays no other style.

One real server per module on a fresh home whose sources folder lacks the AnimeGAN v1 files, which a local
mirror serves, fails or stalls as each test asks. Background work is off.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.mirror import Mirror, serving
from support.service import Server, resized_photo, running_server

pytestmark = pytest.mark.timeout(300)
RETRY = 3  # seconds before a failed download is tried again (ANIPAINT_DOWNLOAD_RETRY)


@pytest.fixture(scope="module")
def mirror(sources: Path):
    with serving(sources) as m:
        yield m


@pytest.fixture(scope="module")
def server(sources: Path, mirror: Mirror, tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("downloads")
    local = work / "sources"  # every source but AnimeGAN v1's: those come from the mirror on first use
    local.mkdir()
    for entry in sources.iterdir():
        if entry.name != "animegan_v1":
            (local / entry.name).symlink_to(entry)
    with running_server(work, home=work / "home", sources=local, mirror=mirror.url, offline=0, background="off",
                        download_retry=RETRY, download_timeout=30) as s:
        yield s


def _predict(server: Server, style: str):
    return server.client.post("/predict", files={"image": ("p.jpg", resized_photo(160), "image/jpeg")},
                              data={"style": style, "faces": "false", "max_side": "64"})


def _style(server: Server, style_id: str) -> dict:
    styles = server.client.get("/api/styles")
    assert styles.status_code == 200, styles.text
    return next(s for s in styles.json() if s["id"] == style_id)


def test_a_failed_download_is_503_then_its_state_says_so_then_a_later_request_retries(
    server: Server, mirror: Mirror
) -> None:
    before = _style(server, "v1-paprika")
    assert before["state"] == "download" and before["detail"] == "download on first use", before
    mirror.failing = 503
    res = _predict(server, "v1-paprika")
    assert res.status_code == 503, res.text
    assert 1 <= int(res.headers["retry-after"]) <= RETRY + 1
    detail = res.json()["detail"]
    assert "v1-paprika" in detail and "download" in detail and "HTTP 503" in detail, detail
    assert "command" not in detail and "http://" not in detail, detail  # for an API caller: no CLI, no address
    tried = len(mirror.requests)

    state = _style(server, "v1-paprika")
    assert state["state"] == "download" and state["available"], state
    assert state["detail"].startswith("download failed: HTTP 503") and "retry at" in state["detail"], state
    assert state["retry_at"], state
    again = _predict(server, "v1-paprika")  # before the retry time: answered at once, nothing tried
    assert again.status_code == 503 and int(again.headers["retry-after"]) >= 1, again.text
    assert len(mirror.requests) == tried

    mirror.failing = None
    time.sleep(RETRY + 0.5)
    later = _predict(server, "v1-paprika")
    assert later.status_code == 200, later.text
    assert later.json()["style"] == "v1-paprika"
    assert _style(server, "v1-paprika")["state"] == "ready"


def test_an_origin_without_the_file_is_a_400_and_the_style_unavailable(server: Server, mirror: Mirror) -> None:
    mirror.failing = 404
    try:
        res = _predict(server, "v1-charge")
        assert res.status_code == 400, res.text
        assert "v1-charge" in res.json()["detail"] and "HTTP 404" in res.json()["detail"], res.text
        state = _style(server, "v1-charge")
        assert state["state"] == "unavailable" and not state["available"], state
        assert "download failed: HTTP 404" in state["reason"], state
    finally:
        mirror.failing = None


def test_a_download_that_hangs_delays_no_other_style(server: Server, mirror: Mirror) -> None:
    mirror.stall()
    try:
        job = server.submit(resized_photo(160), style="v1-hayao", faces="false", max_side="64")
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        server.wait_job_field(job_id, "stage", "download", timeout=30)
        other = _predict(server, "v3-cute")  # the one painter is free: the hanging download holds none
        assert other.status_code == 200, other.text
        assert server.client.get(f"/api/jobs/{job_id}").json()["stage"] == "download"
    finally:
        mirror.gate.set()
    info = server.wait_job(job_id)
    assert info["status"] == "done", info
