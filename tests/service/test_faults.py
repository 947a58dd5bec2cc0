"""Stopping and killing a server with jobs running and queued: after the restart every accepted job is finished or
failed with a reason, and no scratch is left behind."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from anipaint.service.queue.jobs import INTERRUPTED
from support.service import Server, resized_photo

pytestmark = pytest.mark.timeout(1500)  # full-resolution paints on a shared two-core machine


def _start(tmp_path: Path, data: Path, scratch: Path, **overrides) -> Server:
    return Server(tmp_path, data_dir=data, scratch_dir=scratch, jobs=1, queue_size=4, **overrides).wait_ready()


def _accept(server: Server, side: int = 1400) -> tuple[str, list[str]]:
    """One slow full-resolution paint (layer by layer, with scratch files) running, three small jobs queued."""
    slow = server.submit(resized_photo(side), style="v2-hayao", max_side="original", faces="false")
    assert slow.status_code == 202, slow.text
    queued = [server.submit(resized_photo(200), faces="false", max_side=128) for _ in range(3)]
    assert [r.status_code for r in queued] == [202] * 3
    deadline = time.monotonic() + 120
    while server.client.get(f"/api/jobs/{slow.json()['id']}").json()["stage"] != "paint":
        assert time.monotonic() < deadline, "the slow job never started painting"
        time.sleep(0.1)
    return slow.json()["id"], [r.json()["id"] for r in queued]


def _scratch_files(scratch: Path) -> list[Path]:
    return [p for p in scratch.rglob("*") if p.is_file()]


def test_sigterm_finishes_the_running_paint_keeps_the_queue_and_exits_0(prepared_store, tmp_path: Path) -> None:
    data, scratch = tmp_path / "jobs", tmp_path / "scratch"
    scratch.mkdir()
    server = _start(tmp_path, data, scratch, shutdown_grace=900)
    try:
        slow, queued = _accept(server, side=1100)  # over 1 MP: still layer by layer, but done within the grace
        waiting: dict = {}
        client = threading.Thread(target=lambda: waiting.update(res=server.client.post(
            "/predict", files={"image": ("p.jpg", resized_photo(200), "image/jpeg")}, data={"faces": "false"})))
        client.start()
        time.sleep(0.5)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        refused = server.submit(resized_photo(200))
        assert refused.status_code == 503 and "restarting" in refused.json()["detail"], refused.text
        assert int(refused.headers["retry-after"]) > 0
        client.join(60)
        assert waiting["res"].status_code == 503, waiting["res"].text  # JSON, not a plain-text 500
        assert waiting["res"].json()["detail"] and int(waiting["res"].headers["retry-after"]) > 0
        assert server.proc.wait(960) == 0
    finally:
        server.stop()
    assert not _scratch_files(scratch), _scratch_files(scratch)

    again = _start(tmp_path, data, scratch)
    try:
        assert again.wait_job(slow)["status"] == "done"  # finished within the grace period
        assert again.client.get(f"/api/jobs/{slow}/result").status_code == 200
        for job_id in queued:
            assert again.wait_job(job_id)["status"] == "done"
    finally:
        again.stop()


def test_kill_9_fails_the_running_job_paints_the_queue_and_sweeps_scratch(prepared_store, tmp_path: Path) -> None:
    data, scratch = tmp_path / "jobs", tmp_path / "scratch"
    scratch.mkdir()
    server = _start(tmp_path, data, scratch)
    try:
        slow, queued = _accept(server)
        deadline = time.monotonic() + 60
        while not _scratch_files(scratch):
            assert time.monotonic() < deadline, "the full-resolution paint wrote no scratch"
            time.sleep(0.1)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(30)
    finally:
        server.stop()
    assert _scratch_files(scratch)  # what a killed process leaves behind
    orphan = scratch / "anipaint-strips-orphan"  # an older process's per-paint folder, straight in the location
    orphan.mkdir()
    (orphan / "000-layer.f16").write_bytes(b"\0" * 1024)
    an_hour_ago = time.time() - 3600
    os.utime(orphan, (an_hour_ago, an_hour_ago))

    again = _start(tmp_path, data, scratch)
    try:
        assert not _scratch_files(scratch), _scratch_files(scratch)
        assert [p.name for p in scratch.iterdir()] == [f"anipaint-scratch-{again.proc.pid}"]
        lost = again.wait_job(slow)
        assert (lost["status"], lost["error"]) == ("failed", INTERRUPTED)
        for job_id in queued:
            assert again.wait_job(job_id)["status"] == "done"
    finally:
        again.stop()
    assert not scratch.exists() or not list(scratch.iterdir())
