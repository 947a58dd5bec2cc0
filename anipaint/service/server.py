"""Running the app: uvicorn with header and body timeouts, no ``server`` banner, and a graceful stop.

On the first SIGTERM or SIGINT the service stops admitting (503 + Retry-After), lets running paints finish within
``settings.shutdown_grace``, keeps the queued jobs for the next start and exits 0; a second signal stops at once.
Before serving, the job folder must be writable (else one line and exit 2) and orphaned scratch is swept.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from anipaint.engine.strips import scratch
from anipaint.service.app import create_app
from anipaint.service.queue.file_store import check_writable
from anipaint.service.queue.jobs import JobQueue
from anipaint.settings import Settings, get_settings

log = logging.getLogger("anipaint.service")


def timed_protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing connections whose request headers take longer than ``header_timeout``."""

    class HeaderTimeout(H11Protocol):
        _timer = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request on this connection gets its own time

        def connection_lost(self, exc: Exception | None) -> None:
            if self._timer is not None:
                self._timer.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_later(header_timeout, self._late)

        def _late(self) -> None:
            if self.cycle is None or self.cycle.response_complete:  # no request under way: headers incomplete
                self.transport.close()

    return HeaderTimeout


class _Server(uvicorn.Server):
    """uvicorn's server with our signal handling: drain first, then stop, and never re-raise the signal."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self.app = app
        self._signalled = False

    @contextlib.contextmanager
    def capture_signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _on_signal(self, sig: int, frame) -> None:  # noqa: ARG002 - signal handler signature
        if self._signalled:
            self.should_exit = self.force_exit = True
            return
        self._signalled = True
        jobs: JobQueue = self.app.state.jobs
        jobs.drain()
        grace = self.app.state.settings.shutdown_grace
        log.warning("stopping: no new jobs; up to %.0f s for %d running paint(s)", grace, jobs.running())
        threading.Thread(target=self._exit_after_paints, args=(jobs, grace), name="anipaint-drain", daemon=True).start()

    def _exit_after_paints(self, jobs: JobQueue, grace: float) -> None:
        deadline = time.monotonic() + grace
        while jobs.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)  # let waiting /predict clients collect the last pictures
        self.should_exit = True


def serve(host: str | None = None, port: int | None = None, settings: Settings | None = None) -> None:
    """Run the service (what ``anipaint serve`` and ``python -m anipaint.service`` call)."""
    s = settings if settings is not None else get_settings()
    try:
        check_writable(s.jobs_dir)
    except OSError as exc:
        print(f"anipaint: error: the job folder {s.jobs_dir} is not writable ({exc.strerror or exc})", file=sys.stderr)
        raise SystemExit(2) from None
    s = scratch.claim(s)
    try:
        app = create_app(s)
        config = uvicorn.Config(
            app,
            host=host or s.host,
            port=port if port is not None else s.port,
            log_level=s.log_level,
            http=timed_protocol(s.header_timeout),
            timeout_graceful_shutdown=10,
            server_header=False,
        )
        _Server(config, app).run()
    finally:
        scratch.release(s)
    if any(t.name.startswith("anipaint-painter") and t.is_alive() for t in threading.enumerate()):
        # A paint that outlived the grace period is recorded as interrupted at the next start; leaving now,
        # rather than letting the interpreter tear down a thread inside the engine, makes the exit clean.
        log.warning("stopped with a paint still running; it is failed as interrupted at the next start")
        logging.shutdown()
        os._exit(0)


def main() -> None:
    serve()
