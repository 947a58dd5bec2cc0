"""The web service end to end: real uvicorn subprocesses, real HTTP, the real painter and queue."""

from __future__ import annotations

import base64
import io
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.service import (
    Gate,
    InProcessServer,
    Server,
    fast_style,
    in_process_server,
    jpeg,
    photo_bytes,
    resized_photo,
    running_server,
)

pytestmark = pytest.mark.timeout(900)  # generous: the suite shares two cores with others


@pytest.fixture(scope="module")
def server(prepared_store: Path, tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("service")) as s:
        yield s


@pytest.fixture(scope="module")
def strict_server(prepared_store: Path, tmp_path_factory: pytest.TempPathFactory):
    """Tiny limits: 60 KB uploads, 0.5 MP, results kept 1 s."""
    with running_server(tmp_path_factory.mktemp("service"), max_upload_bytes=60_000, max_pixels=500_000,
                        result_ttl=1) as s:
        yield s


@pytest.fixture(scope="module")
def gate() -> Gate:
    return Gate()


@pytest.fixture(scope="module")
def busy_server(prepared_store: Path, tmp_path_factory: pytest.TempPathFactory, gate: Gate):
    """One painter behind a gate the test opens, one waiting slot; /predict waits as long as it takes."""
    with in_process_server(tmp_path_factory.mktemp("service"), gate, queue_size=1, jobs=1, request_timeout=600) as s:
        yield s


def _png(data: bytes) -> Image.Image:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def _detail(res) -> str:
    body = res.json()
    assert isinstance(body.get("detail"), str) and body["detail"], body
    return body["detail"]


# -- the basics ----------------------------------------------------------------------------------------------------
def test_health_ready_docs(server: Server) -> None:
    assert server.client.get("/healthz").json() == {"status": "ok"}
    ready = server.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["style"] == fast_style()
    paths = server.client.get("/openapi.json").json()["paths"]
    for route in (
        "/predict",
        "/api/jobs",
        "/api/jobs/{job_id}",
        "/api/jobs/{job_id}/result",
        "/api/styles",
        "/api/styles/{style_id}/thumbnail",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert route in paths, route
    assert set(paths["/api/jobs/{job_id}"]) == {"get", "delete"}
    assert "swagger" in server.client.get("/docs").text.lower()
    page = server.client.get("/")
    assert page.status_code == 200 and 'id="file-input"' in page.text
    for asset in ("style.css", "app.js", "i18n.js", "favicon.svg"):
        assert server.client.get(f"/static/{asset}").status_code == 200, asset


def test_styles_and_thumbnails(server: Server) -> None:
    styles = server.client.get("/api/styles").json()
    by_id = {s["id"]: s for s in styles}
    assert [s["id"] for s in styles if s["default"]] == [fast_style()]
    assert by_id[fast_style()]["available"] is True
    for s in styles:
        assert {"id", "label", "description", "licence", "available", "reason", "thumbnail", "default"} <= set(s)
        assert s["available"] or s["reason"], s
    res = server.client.get(by_id[fast_style()]["thumbnail"])
    assert res.status_code == 200 and res.headers["content-type"] == "image/png"
    assert _png(res.content).size == (256, 256)
    assert res.headers["x-thumbnail"] in ("ready", "pending")
    deadline = time.monotonic() + 60
    while res.headers["x-thumbnail"] == "pending" and time.monotonic() < deadline:
        time.sleep(0.5)
        res = server.client.get(by_id[fast_style()]["thumbnail"])
    assert res.headers["x-thumbnail"] == "ready"
    unavailable = [s for s in styles if not s["available"]]
    if unavailable:
        grey = _png(server.client.get(unavailable[0]["thumbnail"]).content).convert("RGB")
        r, g, b = (np.asarray(grey, np.int16)[..., i] for i in range(3))
        assert np.abs(r - g).max() <= 1 and np.abs(g - b).max() <= 1  # greyed out
    assert server.client.get("/api/styles/no-such-style/thumbnail").status_code == 404


# -- painting ------------------------------------------------------------------------------------------------------
def test_predict_paints_the_photo(server: Server) -> None:
    res = server.client.post(
        "/predict", files={"image": ("group.jpg", photo_bytes(), "image/jpeg")}, data={"style": fast_style()}
    )
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["style"] == fast_style() and body["seconds"] > 0
    engines = {st["id"]: st["engine"] for st in server.client.get("/api/styles").json()}
    assert body["engine"] == engines[fast_style()], (body["engine"], engines)  # the backend that painted it
    out = _png(base64.b64decode(body["result"])).convert("RGB")
    source = Image.open(io.BytesIO(photo_bytes())).convert("RGB")
    assert max(out.size) == 512 and (body["width"], body["height"]) == out.size
    assert abs(out.width / out.height - source.width / source.height) < 0.01
    plain = np.asarray(source.resize(out.size, Image.Resampling.LANCZOS), np.float32)
    painted = np.asarray(out, np.float32)
    assert np.abs(painted - plain).mean() > 8.0, "the result looks like the input: not styled"
    assert painted.std() > 20.0, "the result is flat"

    small = server.client.post(
        "/predict", files={"image": ("g.jpg", photo_bytes(), "image/jpeg")}, data={"max_side": "200", "faces": "false"}
    )
    assert small.status_code == 200, small.text
    assert max(_png(base64.b64decode(small.json()["result"])).size) == 200


def test_full_resolution_job_reports_progress_while_painting(server: Server) -> None:
    """A 1200 px job at its own size: painted layer by layer, and the progress moves during the paint."""
    res = server.submit(resized_photo(1200), style=fast_style(), max_side="original", faces="false")
    assert res.status_code == 202, res.text
    job_id = res.json()["id"]
    painting: list[float] = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        info = server.client.get(f"/api/jobs/{job_id}").json()
        if info["stage"] == "paint":
            painting.append(info["progress"])
        if info["status"] in ("done", "failed"):
            break
        time.sleep(0.05)
    assert info["status"] == "done", info
    assert (info["width"], info["height"]) == (1200, 1200)
    assert painting == sorted(painting) and any(0.15 < p < 0.75 for p in painting), painting


def test_job_lifecycle(server: Server) -> None:
    res = server.submit(photo_bytes(), style=fast_style(), max_side="original", faces="true")
    assert res.status_code == 202, res.text
    job = res.json()
    assert job["status"] == "queued" and job["position"] >= 1 and len(job["id"]) >= 22
    assert res.headers["location"] == f"/api/jobs/{job['id']}"
    seen = set()
    deadline = time.monotonic() + 120
    while True:
        info = server.client.get(f"/api/jobs/{job['id']}").json()
        assert 0.0 <= info["progress"] <= 1.0
        seen.add(info["status"])
        if info["status"] in ("done", "failed") or time.monotonic() > deadline:
            break
        early = server.client.get(f"/api/jobs/{job['id']}/result")
        if early.status_code != 200:
            assert early.status_code == 409, early.text
        time.sleep(0.05)
    assert info["status"] == "done", info
    assert info["stage"] == "done" and info["progress"] == 1.0 and info["error"] is None
    result = server.client.get(f"/api/jobs/{job['id']}/result")
    assert result.status_code == 200 and result.headers["content-type"] == "image/png"
    assert _png(result.content).size == (900, 900) == (info["width"], info["height"])
    assert (server.data_dir / f"{job['id']}.png").is_file()

    assert server.client.delete(f"/api/jobs/{job['id']}").json()["status"] == "deleted"
    assert server.client.get(f"/api/jobs/{job['id']}").status_code == 404
    assert server.client.get(f"/api/jobs/{job['id']}/result").status_code == 404
    assert not (server.data_dir / f"{job['id']}.png").exists()
    assert server.client.delete(f"/api/jobs/{job['id']}").status_code == 404


# -- bad input -----------------------------------------------------------------------------------------------------
def test_bad_inputs_get_clear_4xx(server: Server) -> None:
    c = server.client
    photo = photo_bytes()

    def post(image: bytes | None, path: str = "/predict", **data: str):
        files = {"image": ("x.jpg", image, "image/jpeg")} if image is not None else None
        return c.post(path, files=files, data=data or None)

    cases = [
        (post(b"this is not a picture at all" * 20), 415),
        (post(b""), 415),
        (post(photo[: len(photo) // 2]), 415),  # truncated JPEG: the header reads, the pixels do not
        (post(photo, style="no-such-style"), 400),
        (post(photo, path="/api/jobs", style="no-such-style"), 400),
        (post(photo, max_side="huge"), 422),
        (post(photo, max_side="5"), 422),
        (post(photo, faces="perhaps"), 422),
        (post(None, style=fast_style()), 422),
        (c.get("/api/jobs/does-not-exist-at-all"), 404),
        (c.get("/api/jobs/does-not-exist-at-all/result"), 404),
        (c.delete("/api/jobs/does-not-exist-at-all"), 404),
        (c.get("/api/jobs/..%2F..%2Fetc%2Fpasswd"), 404),
        (c.get("/no/such/page"), 404),
    ]
    for res, status in cases:
        assert res.status_code == status, (res.request.url, res.status_code, res.text)
        assert res.headers["content-type"].startswith("application/json")
        _detail(res)
    assert "style" in _detail(cases[3][0])

    # The truncated photo is accepted as a job (its header is fine) and fails with a reason, never vanishes.
    accepted = post(photo[: len(photo) // 2], path="/api/jobs")
    assert accepted.status_code == 202
    info = server.wait_job(accepted.json()["id"])
    assert info["status"] == "failed" and info["error_kind"] == "image" and info["error"]
    assert c.get(f"/api/jobs/{info['id']}/result").status_code == 409


def test_upload_and_pixel_limits(strict_server: Server) -> None:
    c = strict_server.client
    too_many_bytes = c.post("/predict", files={"image": ("g.jpg", photo_bytes(), "image/jpeg")})
    assert too_many_bytes.status_code == 413 and "limit" in _detail(too_many_bytes)

    def chunks():  # no Content-Length: the server must count as the body streams in
        yield b'--b\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\n\r\n'
        for _ in range(40):
            yield b"\xff" * 50_000
        yield b"\r\n--b--\r\n"

    streamed = c.post("/api/jobs", content=chunks(), headers={"content-type": "multipart/form-data; boundary=b"})
    assert streamed.status_code == 413, streamed.text

    big = io.BytesIO()
    Image.new("RGB", (1000, 1000), (250, 200, 210)).save(big, format="PNG")  # 1 MP in a few KB
    assert len(big.getvalue()) < 60_000
    too_many_pixels = c.post("/api/jobs", files={"image": ("big.png", big.getvalue(), "image/png")})
    assert too_many_pixels.status_code == 413 and "MP" in _detail(too_many_pixels)


def test_results_expire(strict_server: Server) -> None:
    small = resized_photo(300, quality=80)
    res = strict_server.submit(small, faces="false")
    assert res.status_code == 202, res.text
    job_id = res.json()["id"]
    status = strict_server.client.get(f"/api/jobs/{job_id}")
    while status.status_code == 200 and status.json()["status"] in ("queued", "running"):
        time.sleep(0.05)
        status = strict_server.client.get(f"/api/jobs/{job_id}")
    # With a 1 s TTL the result may already be gone; if it is still here it must be a finished PNG.
    if status.status_code == 200:
        assert status.json()["status"] == "done", status.text
    deadline = time.monotonic() + 10
    while strict_server.client.get(f"/api/jobs/{job_id}").status_code != 404:
        assert time.monotonic() < deadline, "result outlived its TTL"
        time.sleep(0.2)
    assert strict_server.client.get(f"/api/jobs/{job_id}/result").status_code == 404
    assert not list(strict_server.data_dir.glob(f"{job_id}*"))


def test_predict_gives_up_after_request_timeout(prepared_store: Path, tmp_path: Path) -> None:
    """/predict waits at most the request timeout (1 s here) behind a painter the gate holds, whatever the
    machine's speed, and the job ahead of it is painted once the gate opens."""
    gate = Gate()
    with in_process_server(tmp_path, gate, jobs=1, request_timeout=1) as busy:
        ahead = busy.submit(resized_photo(200), faces="false")
        assert ahead.status_code == 202, ahead.text
        gate.wait_held(1)
        t0 = time.monotonic()
        res = busy.client.post("/predict", files={"image": ("g.jpg", resized_photo(200), "image/jpeg")},
                               data={"faces": "false"})
        waited = time.monotonic() - t0
        assert res.status_code in (503, 504), res.text
        assert 1.0 <= waited < 30, waited
        assert "s" in _detail(res)
        if res.status_code == 503:
            assert int(res.headers["retry-after"]) >= 1
        gate.open()
        assert busy.wait_job(ahead.json()["id"])["status"] == "done"


# -- the queue under load ------------------------------------------------------------------------------------------
def test_full_queue_says_503_and_keeps_accepted_jobs(busy_server: InProcessServer, gate: Gate) -> None:
    c = busy_server.client
    photo = resized_photo(600)
    gate.close()
    first = busy_server.submit(photo, faces="false")
    gate.wait_held(1)  # the one painter holds the first job
    answers = [first] + [busy_server.submit(photo, faces="false") for _ in range(3)]
    answers.append(c.post("/predict", files={"image": ("g.jpg", photo, "image/jpeg")}))
    codes = [r.status_code for r in answers]
    assert codes == [202, 202, 503, 503, 503], codes
    for refused in answers[2:]:
        assert int(refused.headers["retry-after"]) >= 1
        assert "busy" in _detail(refused)
    assert c.get(f"/api/jobs/{answers[0].json()['id']}").json()["status"] == "running"
    queued = c.get(f"/api/jobs/{answers[1].json()['id']}").json()
    assert queued["status"] == "queued" and queued["position"] == 1, queued

    metrics = c.get("/metrics").text
    assert "anipaint_queue_depth 1.0" in metrics and "anipaint_jobs_running 1.0" in metrics

    gate.open()
    for accepted in answers[:2]:
        info = busy_server.wait_job(accepted.json()["id"], timeout=600)
        assert info["status"] == "done", info
        assert max(info["width"], info["height"]) == 512

    # Free again: /predict takes its turn behind a job that is already running, rather than being refused.
    gate.close()
    running = busy_server.submit(photo, faces="false")
    assert running.status_code == 202
    gate.wait_held(1)
    waited: dict = {}
    t = threading.Thread(
        target=lambda: waited.update(
            res=c.post(
                "/predict",
                files={"image": ("g.jpg", jpeg(Image.open(io.BytesIO(photo_bytes()))), "image/jpeg")},
                data={"max_side": "256", "faces": "false"},
            )
        )
    )
    t.start()
    t.join(1.0)
    assert t.is_alive() and not waited  # waiting behind the held job, not refused
    gate.open()
    t.join(600)
    assert waited["res"].status_code == 200, waited["res"].text
    assert busy_server.wait_job(running.json()["id"])["status"] == "done"

    metrics = c.get("/metrics").text
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in metrics.splitlines()
        if line and not line.startswith("#")
    }
    assert samples['anipaint_requests_rejected_total{reason="busy"}'] >= 3
    assert samples['anipaint_jobs_total{outcome="done"}'] >= 4
    assert samples['anipaint_stage_seconds_count{stage="paint"}'] >= 4
    assert samples['anipaint_stage_seconds_count{stage="queue"}'] >= 4
    assert samples["anipaint_queue_depth"] == 0


def test_a_v3_full_resolution_job_without_scratch_space_is_507_before_painting(prepared_store: Path,
                                                                               tmp_path: Path) -> None:
    """Graph styles (v3) paint full resolution layer by layer in scratch files, as v1/v2 do: the free-space check
    at the door applies to them too."""
    gate = Gate()
    gate.close()
    with in_process_server(tmp_path, gate, scratch_reserve_bytes=1 << 60) as server:  # no disk has that much
        res = server.submit(resized_photo(1400), style="v3-hayao", max_side="0", faces="false")
        assert res.status_code == 507, res.text
        assert "scratch space" in _detail(res) and int(res.headers["retry-after"]) >= 1
        assert gate.held() == 0 and not list(server.data_dir.glob("*"))  # nothing was queued or painted
        small = server.submit(resized_photo(1400), style="v3-hayao", faces="false")  # capped at 512: no scratch
        assert small.status_code == 202, small.text
