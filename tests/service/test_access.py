"""Who may call what, and what every answer says about itself: security headers, no server banner, /metrics
restricted by a setting, CORS closed unless opened, optional API keys with per-key jobs, rate and queue share."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from support.service import Gate, InProcessServer, Server, in_process_server, resized_photo, running_server

pytestmark = pytest.mark.timeout(300)
HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


@pytest.fixture(scope="module")
def server(prepared_store, tmp_path_factory):
    """A real ``python -m anipaint.service``: no ``server`` banner and the early 413 come from the uvicorn
    configuration of ``serve()``, which the in-process server does not use."""
    with running_server(tmp_path_factory.mktemp("access")) as s:
        yield s


def _post(server: Server | InProcessServer, route: str = "/api/jobs", headers: dict | None = None,
          image: bytes | None = None, **fields: str):
    return server.client.post(
        route,
        files={"image": ("p.jpg", image or resized_photo(200), "image/jpeg")},
        data={"faces": "false", "max_side": "64", **fields},
        headers=headers,
    )


def _raw_answer(server: Server, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(request)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    return got


def test_every_answer_carries_security_headers_and_no_banner(server: Server) -> None:
    answers = [
        server.client.get("/"),
        server.client.get("/static/app.js"),
        server.client.get("/api/styles"),
        server.client.get("/api/jobs/nope"),
        server.client.get("/no/such/page"),
        server.client.get("/docs"),
        server.client.get("/openapi.json"),
        _post(server, "/predict", image=b"not a picture"),
    ]
    early = _raw_answer(server, b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")
    assert early.startswith(b"HTTP/1.1 413")  # refused before the body: still with the headers
    head = early.split(b"\r\n\r\n", 1)[0].decode().lower()
    for name, value in HEADERS.items():
        assert f"{name}: {value.lower()}" in head, head
    assert "content-security-policy:" in head and "\r\nserver:" not in head
    for res in answers:
        for name, value in HEADERS.items():
            assert res.headers.get(name) == value, (res.request.url, name, res.headers)
        policy = res.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
        assert "server" not in res.headers, res.headers["server"]
    assert "'unsafe-inline'" not in answers[0].headers["content-security-policy"]
    docs_policy = answers[5].headers["content-security-policy"]
    assert "script-src 'self' 'sha256-" in docs_policy  # the Swagger page's one inline script, by hash


def test_cors_is_closed_by_default(server: Server) -> None:
    res = server.client.get("/api/styles", headers={"Origin": "https://elsewhere.example"})
    assert "access-control-allow-origin" not in res.headers
    pre = server.client.options(
        "/api/jobs", headers={"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in pre.headers


def test_cors_and_metrics_follow_their_settings(prepared_store, tmp_path: Path) -> None:
    with in_process_server(tmp_path, cors_origins="https://app.example", metrics_allow="10.0.0.0/8") as s:
        res = s.client.get("/api/styles", headers={"Origin": "https://app.example"})
        assert res.headers["access-control-allow-origin"] == "https://app.example"
        other = s.client.get("/api/styles", headers={"Origin": "https://elsewhere.example"})
        assert "access-control-allow-origin" not in other.headers
        metrics = s.client.get("/metrics")
        assert metrics.status_code == 403 and metrics.json()["detail"]
    with in_process_server(tmp_path, metrics_allow="127.0.0.1, ::1") as s:
        assert s.client.get("/metrics").status_code == 200


def test_api_keys_own_their_jobs_and_have_limits(prepared_store, tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("# one key a line\nalpha-key-1\nbeta-key-2\n")
    gate = Gate()  # closed: alpha's job waits at it, queued or painting, until the test opens it
    with in_process_server(tmp_path, gate, api_keys=str(keys), key_rate=200, key_jobs=1) as s:
        alpha, beta = {"X-API-Key": "alpha-key-1"}, {"Authorization": "Bearer beta-key-2"}
        assert s.client.get("/").status_code == 200 and s.client.get("/healthz").status_code == 200
        for res in (_post(s), s.client.get("/api/styles"), _post(s, headers={"X-API-Key": "wrong"})):
            assert res.status_code == 401 and res.json()["detail"], res.text
        job = _post(s, headers=alpha)
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        assert s.client.get(f"/api/jobs/{job_id}", headers=beta).status_code == 404
        assert s.client.delete(f"/api/jobs/{job_id}", headers=beta).status_code == 404
        share = _post(s, headers=alpha)  # alpha's one job is still queued or painting
        assert share.status_code == 429 and int(share.headers["retry-after"]) > 0, share.text
        assert _post(s, headers=beta).status_code == 202  # beta has its own share
        info = s.client.get(f"/api/jobs/{job_id}", headers=alpha)
        assert info.status_code == 200
        gate.open()
        assert s.wait_job(job_id, headers=alpha, poll=1.0)["status"] == "done"
        assert s.client.get(f"/api/jobs/{job_id}/result", headers=alpha).status_code == 200
        answers = [s.client.get("/api/config", headers=beta).status_code for _ in range(205)]
        assert 429 in answers, answers
        limited = s.client.get("/api/config", headers=beta)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) > 0
        assert s.client.get("/api/config", headers=alpha).status_code == 200  # each key has its own budget
