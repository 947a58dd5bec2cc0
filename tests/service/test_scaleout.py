"""Scale-out: the same HTTP API backed by Celery workers through a real Redis, painting in other processes."""

from __future__ import annotations

import base64
import io
import json
import shutil
import time

import pytest
from PIL import Image

from support.builds import seed_builds
from support.cluster import Worker
from support.service import GROUP_PHOTO, Server, redis_server, resized_photo

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="module")
def cluster(prepared_store, redis_url, tmp_path_factory):
    """Two worker processes and a web process that paints nothing itself."""
    workdir = tmp_path_factory.mktemp("cluster")
    workers = [Worker(f"painter{i}", redis_url, workdir) for i in (1, 2)]
    server = Server(workdir, broker_url=redis_url, queue_size=4)
    try:
        for w in workers:
            w.wait_ready()
        server.wait_ready()
        yield server, workers
    finally:
        server.stop()
        for w in workers:
            w.stop()


def test_jobs_are_painted_by_the_workers(cluster):
    server, workers = cluster
    photo = resized_photo(640)
    ids = []
    for _ in range(4):
        res = server.submit(photo, max_side=640)
        assert res.status_code == 202, res.text
        ids.append(res.json()["id"])
    for job_id in ids:
        info = server.wait_job(job_id, timeout=240)
        assert info["status"] == "done", info
        png = server.client.get(f"/api/jobs/{job_id}/result")
        assert png.status_code == 200 and png.headers["content-type"] == "image/png"
        assert Image.open(io.BytesIO(png.content)).size == (640, 640)
    logs = [w.log() for w in workers]
    done_by = [log.count("succeeded") for log in logs]
    assert sum(done_by) == 4 and all(n >= 1 for n in done_by), done_by  # the work was shared out


def test_a_video_job_is_painted_by_a_worker_with_its_sound(cluster, tmp_path):
    """The upload waits in Redis, a worker paints it, and the MP4 comes back through Redis with the sound."""
    av = pytest.importorskip("av")
    server, _ = cluster
    clip = GROUP_PHOTO.parent / "realshort.mp4"
    res = server.client.post("/api/jobs", files={"image": ("clip.mp4", clip.read_bytes(), "video/mp4")},
                             data={"max_side": "160"})
    assert res.status_code == 202, res.text
    info = server.wait_job(res.json()["id"], timeout=300)
    assert info["status"] == "done" and info["media_type"] == "video/mp4" and info["frames"] == 36, info
    got = server.client.get(f"/api/jobs/{info['id']}/result")
    assert got.status_code == 200 and got.headers["content-type"] == "video/mp4"
    out = tmp_path / "painted.mp4"
    out.write_bytes(got.content)
    with av.open(str(out)) as b:
        assert len(b.streams.audio) == 1
        assert sum(1 for _ in b.decode(video=0)) == 36


def test_predict_and_failures_travel_through_redis(cluster):
    server, _ = cluster
    res = server.client.post("/predict", files={"image": ("p.jpg", resized_photo(300), "image/jpeg")})
    assert res.status_code == 200, res.text
    body = res.json()
    img = Image.open(io.BytesIO(base64.b64decode(body["result"])))
    assert img.size == (body["width"], body["height"]) == (300, 300)
    truncated = resized_photo(300)[:2000]  # its header reads (300x300 JPEG), so the door accepts it
    res = server.submit(truncated)
    assert res.status_code == 202, res.text  # the worker must report the failure, not lose the job
    info = server.wait_job(res.json()["id"], timeout=60)
    assert info["status"] == "failed" and info["error"], info
    res = server.submit(b"not a picture at all")
    assert res.status_code == 415 and res.json()["detail"], res.text  # refused at the door, no worker involved


def test_portrait_options_reach_the_workers(cluster):
    """portrait and background travel in the job request through Redis; faces_found comes back from the worker."""
    server, _ = cluster
    res = server.submit(GROUP_PHOTO.read_bytes(), faces="false", portrait="true", background="v3-shinkai")
    assert res.status_code == 202, res.text
    info = server.wait_job(res.json()["id"], timeout=240)
    assert info["status"] == "done" and info["faces_found"] >= 2, info


def test_cancelled_job_is_forgotten(cluster):
    server, _ = cluster
    res = server.submit(resized_photo(640), max_side=640)
    job_id = res.json()["id"]
    assert server.client.delete(f"/api/jobs/{job_id}").status_code in (200, 204)
    assert server.client.get(f"/api/jobs/{job_id}").status_code == 404


def test_full_queue_answers_busy_and_keeps_accepted_jobs(cluster, redis_url):
    """The gate: every worker stops taking tasks (Celery's cancel_consumer), so the waiting list fills to the
    server's four slots and what comes after is refused with 503 + Retry-After; reopened, the workers paint every
    accepted job."""
    from celery import Celery

    server, workers = cluster
    control = Celery("anipaint", broker=redis_url).control
    closed = control.cancel_consumer("celery", reply=True, timeout=10, limit=len(workers))
    assert len(closed) == len(workers), closed
    accepted, busy = [], []
    try:
        for _ in range(6):
            res = server.submit(resized_photo(128), max_side=128)
            if res.status_code == 202:
                accepted.append(res.json()["id"])
            else:
                busy.append(res)
        time.sleep(1)  # time enough for a worker to take one, were the gate open
        assert [server.client.get(f"/api/jobs/{i}").json()["status"] for i in accepted] == ["queued"] * 4
    finally:
        opened = control.add_consumer("celery", reply=True, timeout=10, limit=len(workers))
    assert len(opened) == len(workers), opened
    assert len(busy) == 2, [r.status_code for r in busy]
    for res in busy:
        assert res.status_code == 503 and int(res.headers["Retry-After"]) > 0 and res.json()["detail"]
    for job_id in accepted:
        assert server.wait_job(job_id, timeout=120)["status"] == "done"


def test_a_worker_moves_onto_its_fast_engine_without_a_restart(sources, tmp_path, engine_builds):
    """A worker on a machine with nothing measured paints at once on the plain engine, converts and measures the
    fast engines in the background (this run's builds copied in: compiling is checked once elsewhere), and its
    next jobs run on what ``auto`` chose; each job says which engine painted."""
    src = tmp_path / "sources" / "animeganv3"
    src.mkdir(parents=True)
    shutil.copy(sources / "animeganv3" / "AnimeGANv3_tiny_Cute.onnx", src)
    home, style = tmp_path / "home", "v3-cute"
    engine_builds(style)
    seed_builds(style, home)
    settings = dict(home=home, sources=src.parent, default_style=style, faces=0)
    with redis_server(tmp_path) as url:
        worker = Worker("fresh", url, tmp_path, background="all", background_nice=0, **settings)
        server = Server(tmp_path, broker_url=url, **settings)
        try:
            worker.wait_ready()
            server.wait_ready()
            first = server.submit(resized_photo(256), max_side=256)
            assert first.status_code == 202, first.text
            info = server.wait_job(first.json()["id"], timeout=600)
            assert info["status"] == "done" and info["engine"] == "torch", info  # nothing was built yet

            deadline = time.monotonic() + 2000
            while not list((home / "models" / style / "engine").glob("auto-*.json")):
                assert worker.proc.poll() is None and time.monotonic() < deadline, worker.log()[-3000:]
                time.sleep(2)
            [record] = (home / "models" / style / "engine").glob("auto-*.json")
            choice = json.loads(record.read_text())["choice"]
            engines = []
            while choice not in engines:  # the worker moves over once it hears the measurement is done
                assert time.monotonic() < deadline, (engines, worker.log()[-3000:])
                res = server.submit(resized_photo(256), max_side=256)
                engines.append(server.wait_job(res.json()["id"], timeout=600)["engine"])
            assert set(engines) <= {"torch", choice}, engines
            assert f"{style} now paints with {choice}" in worker.log()
        finally:
            server.stop()
            worker.stop()
