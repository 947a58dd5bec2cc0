"""A real anipaint server for tests: in a subprocess on a free loopback port, or in this process.

The server inherits the
session's ``ANIPAINT_HOME`` (set by conftest.py), so it uses the session model store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from PIL import Image

from support.paths import GROUP_PHOTO, REPO

READY_TIMEOUT = 180.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fast_style() -> str:
    """The quickest style available here (v3-cute), else the first available one."""
    from anipaint.models import availability
    from anipaint.settings import reload_settings

    usable = [st.style.id for st in availability.style_status(reload_settings()) if st.available]
    assert usable, "no style is available in the test model store"
    return "v3-cute" if "v3-cute" in usable else usable[0]


class _Conveniences:
    client: httpx.Client

    def submit(self, image: bytes, name: str = "photo.jpg", **fields: object) -> httpx.Response:
        data = {k: str(v) for k, v in fields.items()}
        return self.client.post("/api/jobs", files={"image": (name, image, "image/jpeg")}, data=data)

    def wait_job(self, job_id: str, timeout: float = 120.0, headers: dict | None = None, poll: float = 0.1) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            res = self.client.get(f"/api/jobs/{job_id}", headers=headers)
            assert res.status_code == 200, res.text
            info = res.json()
            if info["status"] in ("done", "failed"):
                return info
            time.sleep(poll)
        raise TimeoutError(f"job {job_id} not finished after {timeout:.0f} s")

    def wait_job_field(self, job_id: str, field: str, value: object, timeout: float = 120.0) -> None:
        """Poll a job until ``field`` (``status``, ``stage``) reads ``value``."""
        deadline = time.monotonic() + timeout
        while self.client.get(f"/api/jobs/{job_id}").json()[field] != value:
            assert time.monotonic() < deadline, f"job {job_id}: {field} never became {value!r}"
            time.sleep(0.05)


class Server(_Conveniences):
    """``python -m anipaint.service`` (which calls ``serve``) with ANIPAINT_* overrides."""

    def __init__(
        self, workdir: Path, *, data_dir: Path | None = None, preexec_fn=None, **overrides: object
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir or workdir / f"jobs-{self.port}"
        self.log_path = workdir / f"server-{self.port}.log"
        env = dict(os.environ)
        env.update(
            ANIPAINT_HOST="127.0.0.1",
            ANIPAINT_PORT=str(self.port),
            ANIPAINT_DATA_DIR=str(self.data_dir),
            ANIPAINT_DEFAULT_STYLE=fast_style(),
            ANIPAINT_LOG_LEVEL="warning",
            ANIPAINT_SHUTDOWN_GRACE="5",
            PYTHONUNBUFFERED="1",
        )
        env.update({f"ANIPAINT_{k.upper()}": str(v) for k, v in overrides.items()})
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "anipaint.service"],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec_fn,
        )
        self.client = httpx.Client(base_url=self.url, timeout=600.0)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> Server:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if self.client.get("/readyz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"server not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@contextlib.contextmanager
def running_server(workdir: Path, **overrides: object) -> Iterator[Server]:
    """A ready server for the ``with`` block, stopped afterwards even if it never became ready."""
    server = Server(workdir, **overrides)  # type: ignore[arg-type]
    try:
        yield server.wait_ready()
    finally:
        server.stop()


class Gate:
    """Holds every paint of an in-process server until the test opens it: a queue kept busy for as long as a
    test needs, without big pictures to paint. ``held()`` is how many paints wait at it now."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._held = 0
        self._lock = threading.Lock()

    def open(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._open.clear()

    def held(self) -> int:
        with self._lock:
            return self._held

    def wait_held(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.held() < count:
            assert time.monotonic() < deadline, f"{self.held()} paint(s) at the gate, {count} expected"
            time.sleep(0.02)

    def wrap(self, runner):  # noqa: ANN001, ANN201 - anipaint.service.queue.jobs.Runner
        def run(request, progress):  # noqa: ANN001, ANN202
            with self._lock:
                self._held += 1
            try:
                if not self._open.wait(600):
                    raise TimeoutError("the test never opened the gate")
            finally:
                with self._lock:
                    self._held -= 1
            return runner(request, progress)

        return run


class InProcessServer(_Conveniences):
    """The real app (``create_app``) served by uvicorn on a loopback port from a thread of the test process,
    its painters behind ``gate`` when one is given. For what needs a real socket and a page but not a process
    of its own; settings are ``reload_settings()`` with ``overrides``."""

    def __init__(self, workdir: Path, gate: Gate | None = None, **overrides: object) -> None:
        import uvicorn

        from anipaint.service.app import create_app
        from anipaint.service.queue.jobs import paint_runner
        from anipaint.settings import reload_settings

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = Path(overrides.pop("data_dir", None) or workdir / f"jobs-{self.port}")
        settings = dataclasses.replace(reload_settings(), data_dir=self.data_dir, default_style=fast_style(),
                                       host="127.0.0.1", port=self.port, log_level="warning", **overrides)
        runner = paint_runner(settings)
        app = create_app(settings, runner=gate.wrap(runner) if gate else runner)
        self.metrics = app.state.metrics
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, name=f"uvicorn-{self.port}", daemon=True)
        self._thread.start()
        self.client = httpx.Client(base_url=self.url, timeout=600.0)
        deadline = time.monotonic() + READY_TIMEOUT
        while not self._server.started:
            assert self._thread.is_alive() and time.monotonic() < deadline, "in-process server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.client.close()
        self._server.should_exit = True
        self._thread.join(60)


@contextlib.contextmanager
def in_process_server(workdir: Path, gate: Gate | None = None, **overrides: object) -> Iterator[InProcessServer]:
    server = InProcessServer(workdir, gate, **overrides)
    try:
        yield server
    finally:
        if gate is not None:
            gate.open()  # let held paints finish so the painters stop
        server.stop()


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """A real redis-server on a free loopback port, nothing saved to disk; yields its URL."""
    import redis

    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    try:
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)


def photo_bytes() -> bytes:
    return GROUP_PHOTO.read_bytes()


def jpeg(img: Image.Image, quality: int = 85) -> bytes:
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def resized_photo(side: int, quality: int = 85) -> bytes:
    """The group photo scaled so its long side is ``side`` (upscaled too: big pictures paint slowly)."""
    img = Image.open(GROUP_PHOTO).convert("RGB")
    scale = side / max(img.size)
    size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    return jpeg(img.resize(size, Image.Resampling.LANCZOS), quality)


@contextlib.contextmanager
def commercial_only_server(workdir: Path) -> Iterator[Server]:
    """A server in commercial-only mode, once it answers; ready too if any commercially licensed style is here
    (with none, its default style cannot load, so /readyz stays 503 and says why)."""
    from anipaint.models import availability
    from anipaint.settings import reload_settings

    server = Server(workdir, commercial_only=1)
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while server.proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if server.client.get("/healthz", timeout=2).status_code == 200:
                    break
            time.sleep(0.25)
        settings = dataclasses.replace(reload_settings(), commercial_only=True)
        yield server.wait_ready() if any(st.available for st in availability.style_status(settings)) else server
    finally:
        server.stop()
