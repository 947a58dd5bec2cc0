"""Storage faults against a real server: the painter never dies, readiness tells the truth, disk trouble is a clear
JSON answer with no server path in it, no partial files, and the sweeper deletes only what the service wrote."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.service import (
    READY_TIMEOUT,
    REPO,
    Gate,
    InProcessServer,
    Server,
    in_process_server,
    photo_bytes,
    resized_photo,
    running_server,
)

pytestmark = pytest.mark.timeout(300)


def _detail(res) -> str:
    assert res.headers["content-type"].startswith("application/json"), res.text
    detail = res.json()["detail"]
    assert isinstance(detail, str) and detail
    return detail


def _no_paths(text: str, *paths: Path) -> None:
    for path in paths:
        assert str(path) not in text and "/tmp" not in text, text


def _predict(server: Server | InProcessServer, image: bytes, **fields):
    data = {"faces": "false", **{k: str(v) for k, v in fields.items()}}
    return server.client.post("/predict", files={"image": ("p.jpg", image, "image/jpeg")}, data=data)


def _ready(server: InProcessServer) -> InProcessServer:
    """Wait for /readyz as ``running_server`` does (the in-process server answers before its painter is warm)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while (ready := server.client.get("/readyz")).status_code != 200:
        assert time.monotonic() < deadline, f"not ready after {READY_TIMEOUT:.0f} s: {ready.text}"
        time.sleep(0.1)
    return server


def test_a_failed_status_write_fails_the_job_and_the_painter_lives_on(prepared_store, tmp_path: Path) -> None:
    """The state file of a running job cannot be written (a folder sits where its temporary file goes)."""
    gate = Gate()  # closed: the job is running (its state says so) but paints only once the folder is in place
    with in_process_server(tmp_path, gate, jobs=1) as server:
        _ready(server)
        res = server.submit(resized_photo(200), faces="false")
        assert res.status_code == 202, res.text
        job_id = res.json()["id"]
        gate.wait_held(1)
        assert server.client.get(f"/api/jobs/{job_id}").json()["status"] == "running"
        (server.data_dir / f"{job_id}.json.tmp").mkdir()
        gate.open()
        info = server.wait_job(job_id, timeout=120)
        assert info["status"] == "failed" and info["error"], info
        _no_paths(info["error"], server.data_dir)
        assert server.client.get("/readyz").status_code == 200
        after = server.submit(resized_photo(200), faces="false")  # the same single painter takes the next job
        assert server.wait_job(after.json()["id"], timeout=120)["status"] == "done"


def test_an_unwritable_job_folder_makes_the_server_unready_not_broken(prepared_store, tmp_path: Path) -> None:
    with in_process_server(tmp_path, jobs=1) as server:
        _ready(server)
        shutil.rmtree(server.data_dir)
        server.data_dir.write_text("a file where the job folder was")
        ready = server.client.get("/readyz")
        assert ready.status_code == 503 and "writable" in _detail(ready)
        for res in (_predict(server, resized_photo(200)), server.submit(resized_photo(200))):
            assert res.status_code in (503, 507), res.text
            _no_paths(_detail(res), server.data_dir)
            assert int(res.headers["retry-after"]) > 0
        server.data_dir.unlink()
        deadline = time.monotonic() + 10
        while server.client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "not ready again after the folder came back"
            time.sleep(0.2)
        assert _predict(server, resized_photo(200)).status_code == 200


def _small_files(limit: int):
    def limit_file_size() -> None:  # in the server process: writes past `limit` bytes fail like a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_file_size


def test_a_full_disk_is_507_with_no_partial_files(prepared_store, tmp_path: Path) -> None:
    """A subprocess server: the file-size limit applies to the whole process it is set in."""
    with running_server(tmp_path, preexec_fn=_small_files(150_000), jobs=1, log_level="error") as server:
        big = _predict(server, photo_bytes(), max_side=512)  # a 512 px PNG is larger than 150 KB
        assert big.status_code == 507, big.text
        assert "room" in _detail(big) and int(big.headers["retry-after"]) > 0
        _no_paths(_detail(big), server.data_dir)
        job = server.submit(photo_bytes(), max_side=512, faces="false")
        info = server.wait_job(job.json()["id"])
        assert (info["status"], info["error_kind"]) == ("failed", "disk"), info
        assert not list(server.data_dir.glob("*.tmp")), list(server.data_dir.iterdir())
        small = _predict(server, resized_photo(200), max_side=64)  # what fits is still painted
        assert small.status_code == 200, small.text


def test_the_server_refuses_to_start_on_an_unwritable_job_folder(prepared_store, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    env = {**os.environ, "ANIPAINT_DATA_DIR": str(blocker / "jobs"), "ANIPAINT_PORT": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "anipaint.cli", "serve"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("anipaint: error:") and "not writable" in lines[0], proc.stderr


def test_the_sweeper_deletes_only_what_the_service_wrote(prepared_store, tmp_path: Path) -> None:
    # the strangers are in the job folder before the server starts: its first sweep and its recovery see them too
    data = tmp_path / "jobs"
    data.mkdir()
    strangers = [data / "notes.txt", data / "backup.json", data / "ABCDEFGHIJKLMNOPQRSTUVWX.txt", data / "x.png"]
    two_hours_ago = time.time() - 7200
    for path in strangers:
        path.write_text("not the service's")
        os.utime(path, (two_hours_ago, two_hours_ago))
    with in_process_server(tmp_path, result_ttl=1.0, data_dir=data) as server:
        assert server.data_dir == data
        job_id = server.submit(resized_photo(200), faces="false").json()["id"]
        assert server.wait_job(job_id)["status"] == "done"
        deadline = time.monotonic() + 15
        while list(data.glob(f"{job_id}*")):
            assert time.monotonic() < deadline, "the job's own files outlived the TTL"
            time.sleep(0.25)
    assert all(path.read_text() == "not the service's" for path in strangers)
