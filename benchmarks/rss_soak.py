"""Soak the real server: many /predict requests of mixed sizes, styles and options (and bad inputs), with the
server's memory and open files sampled as it goes.

    .venv/bin/python benchmarks/rss_soak.py [--minutes 10] [--clients 2] [--styles v3-hayao,v3-shinkai,v3-cute]

Starts ``python -m anipaint.service`` on a free port with the current model store (background warm-up off,
so nothing but the requests runs), warms each style once, then sends requests from ``--clients`` threads until
the time is up. Prints requests by status, and the server's RSS and open file descriptors after the warm-up,
at each quarter of the soak and at the end (RSS of the server and its children, from /proc).
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from anipaint.settings import get_settings  # noqa: E402

BAD_INPUTS = (b"", b"not a picture", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, b"GIF89a" + b"\xff" * 200)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` and its children (the background, if any), in MB."""
    pids = [pid]
    try:
        pids += [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def _photos() -> list[bytes]:
    settings = get_settings()
    pictures = [Image.open(settings.samples_dir / "group_pakutaso.jpg").convert("RGB")]
    try:
        import skimage.data as data

        pictures += [Image.fromarray(data.astronaut()), Image.fromarray(data.coffee())]
    except ImportError:
        pass
    out = []
    for picture, fmt in zip(pictures, itertools.cycle(("JPEG", "PNG", "WEBP")), strict=False):
        buf = io.BytesIO()
        picture.save(buf, fmt)
        out.append(buf.getvalue())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--styles", default="v3-hayao,v3-shinkai,v3-cute")
    args = parser.parse_args(argv)
    styles = [s for s in args.styles.split(",") if s]
    photos = _photos()
    port = _free_port()
    env = dict(os.environ, ANIPAINT_HOST="127.0.0.1", ANIPAINT_PORT=str(port), ANIPAINT_BACKGROUND="off",
               ANIPAINT_LOG_LEVEL="warning", ANIPAINT_DATA_DIR=tempfile.mkdtemp(prefix="anipaint-soak-"))
    log = open(Path(env["ANIPAINT_DATA_DIR"]) / "server.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen([sys.executable, "-m", "anipaint.service"], cwd=ROOT, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600.0)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if client.get("/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.25)
        else:
            raise SystemExit("server not ready after 120 s")
        for style in styles:  # warm-up: every style loaded, every option's models too
            for options in ({"faces": "true"}, {"portrait": "true"}):
                client.post("/predict", files={"image": ("p.jpg", photos[0])},
                            data={"style": style, "max_side": "512", **options})
        samples = [(0.0, 0, _rss_mb(server.pid), _fds(server.pid))]
        statuses: Counter[int] = Counter()
        lock = threading.Lock()
        stop_at = time.monotonic() + args.minutes * 60
        counter = itertools.count()

        def work() -> None:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600.0) as own:
                while time.monotonic() < stop_at:
                    i = next(counter)
                    if i % 7 == 6:
                        files = {"image": ("bad.bin", BAD_INPUTS[i % len(BAD_INPUTS)])}
                        data = {"style": styles[0]}
                    else:
                        files = {"image": (f"p{i}", photos[i % len(photos)])}
                        data = {"style": styles[i % len(styles)], "max_side": str((256, 512, 768)[i % 3]),
                                "faces": "true" if i % 2 else "false"}
                        if i % 5 == 0:
                            data["portrait"] = "true"
                    status = own.post("/predict", files=files, data=data).status_code
                    with lock:
                        statuses[status] += 1

        threads = [threading.Thread(target=work) for _ in range(args.clients)]
        started = time.monotonic()
        for t in threads:
            t.start()
        quarter = args.minutes * 60 / 4
        for k in range(1, 5):
            while time.monotonic() < started + k * quarter and any(t.is_alive() for t in threads):
                time.sleep(1.0)
            with lock:
                done = sum(statuses.values())
            samples.append((time.monotonic() - started, done, _rss_mb(server.pid), _fds(server.pid)))
        for t in threads:
            t.join()
        print(f"{sum(statuses.values())} requests in {args.minutes:g} min from {args.clients} clients; "
              f"by status: {dict(sorted(statuses.items()))}; server alive: {server.poll() is None}")
        print("   elapsed s   requests   server RSS MB   open fds")
        for elapsed, done, rss, fds in samples:
            print(f"   {elapsed:9.0f}   {done:8d}   {rss:13.0f}   {fds:8d}")
    finally:
        client.close()
        server.terminate()
        server.wait(30)
        log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
